#include "tools/bench/coll.hpp"

namespace dcomm::bench {

const char* to_string(Coll c) noexcept {
  switch (c) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kScatter: return "scatter";
    case Coll::kGather: return "gather";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kAllToAll: return "all_to_all";
    case Coll::kBarrier: return "barrier";
    case Coll::kSendRecv: return "sendrecv";
  }
  return "unknown";
}

bool parse_coll(const std::string& name, Coll* out) noexcept {
  for (Coll c : kAllColls) {
    if (name == to_string(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

// to_collective() relies on the first nine values mirroring dcomm::Collective one for one.
static_assert(static_cast<int>(Coll::kAllReduce) == static_cast<int>(Collective::kAllReduce));
static_assert(static_cast<int>(Coll::kReduceScatter) == static_cast<int>(Collective::kReduceScatter));
static_assert(static_cast<int>(Coll::kBarrier) == static_cast<int>(Collective::kBarrier));

bool to_collective(Coll c, Collective* out) noexcept {
  if (c == Coll::kSendRecv) return false;
  *out = static_cast<Collective>(static_cast<uint8_t>(c));
  return true;
}

bool is_reducing(Coll c) noexcept {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

bool is_rooted(Coll c) noexcept {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kScatter || c == Coll::kGather;
}

}  // namespace dcomm::bench
