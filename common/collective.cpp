#include <dcomm/process_group.hpp>

#include <string>

namespace dcomm {

const char* to_string(Collective c) noexcept {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kScatter: return "scatter";
    case Collective::kGather: return "gather";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBarrier: return "barrier";
  }
  return "unknown";
}

bool parse_collective(const std::string& name, Collective* out) noexcept {
  static constexpr Collective kAll[] = {Collective::kAllReduce, Collective::kBroadcast,     Collective::kReduce,
                                        Collective::kScatter,   Collective::kGather,        Collective::kAllGather,
                                        Collective::kReduceScatter, Collective::kAllToAll, Collective::kBarrier};
  // Accept "all_reduce", "allreduce" and "all-reduce" alike.
  std::string squashed;
  for (char ch : name) {
    if (ch != '_' && ch != '-') squashed += ch;
  }
  for (Collective c : kAll) {
    std::string canonical;
    for (const char* p = to_string(c); *p != '\0'; ++p) {
      if (*p != '_') canonical += *p;
    }
    if (squashed == canonical) {
      *out = c;
      return true;
    }
  }
  return false;
}

}  // namespace dcomm
