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
  if (c == Coll::kSendRecv) return {""};
  std::vector<std::string> out;
  auto add = [&out](const std::string& a) {
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);  // "ring,all" runs ring once
  };
  for (const std::string& name : split_algos(algo)) {
    if (name == "auto") {
      add("");
    } else if (name == "all") {
      if (!registered) {
        throw UsageError("--algo all: this dcomm does not list its algorithms (dcomm::algorithms()); name one with "
                         "--algo NAME or use --algo auto");
      }
      if (registered->empty()) add("");
      for (const std::string& r : *registered) add(r);
    } else if (!registered || std::find(registered->begin(), registered->end(), name) != registered->end()) {
      add(name);
    }
  }
  return out;
}

}  // namespace dcomm::bench
