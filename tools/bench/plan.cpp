#include "tools/bench/plan.hpp"

#include <algorithm>

namespace dcomm::bench {

std::vector<Layout> plan_layouts(const Options& o, Coll c, DType dtype, int world) {
  if (c == Coll::kBarrier) return {layout(c, 0, dtype, world)};
  std::vector<Layout> out;
  for (std::size_t bytes : sweep(o.min_bytes, o.max_bytes, o.factor)) {
    Layout l = layout(c, bytes, dtype, world);
    if (l.count == 0 && bytes != 0) continue;           // smaller than one element per rank
    if (!out.empty() && out.back().bytes == l.bytes) continue;  // rounded onto the previous size
    out.push_back(l);
  }
  return out;
}

std::vector<std::string> plan_algos(const std::string& algo, Coll c,
                                    const std::optional<std::vector<std::string>>& registered) {
  // sendrecv is point-to-point: there is no algorithm to choose.
  if (c == Coll::kSendRecv || algo == "auto") return {""};
  if (algo == "all") {
    if (!registered) {
      throw UsageError("--algo all: this dcomm does not list its algorithms (dcomm::algorithms()); name one with "
                       "--algo NAME or use --algo auto");
    }
    return registered->empty() ? std::vector<std::string>{""} : *registered;
  }
  if (registered && std::find(registered->begin(), registered->end(), algo) == registered->end()) return {};
  return {algo};
}

}  // namespace dcomm::bench
