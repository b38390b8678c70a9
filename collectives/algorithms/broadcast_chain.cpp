// broadcast[chain]: a pipelined chain root -> root+1 -> ... -> root+P-1.
//   The vector is cut into k chunk-sized pieces; each rank forwards piece i to the next rank as soon as it has
//   arrived, so after the pipeline fills every link is busy.
// Cost with k = ⌈n / chunk⌉: (P - 2 + k)(α + n/k·β) → nβ for large n.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_broadcast_chain(Context& c) {
  const int p = c.size();
  if (p == 1) return;
  char* buf = static_cast<char*>(c.args.send.data);
  const int v = pattern::mod(c.rank() - c.args.root, p);
  const int prev = v > 0 ? (c.rank() + p - 1) % p : -1;
  const int next = v < p - 1 ? (c.rank() + 1) % p : -1;
  std::vector<pattern::Block> parts = pattern::pieces({0, c.args.send.count}, c.chunk_elems());
  std::vector<transport::RequestPtr> recvs;
  if (prev >= 0) {
    for (const pattern::Block& pc : parts)
      recvs.push_back(c.irecv(prev, 0, c.at(buf, pc.offset), pc.count * c.esize()));
  }
  std::vector<transport::RequestPtr> sends;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (prev >= 0) c.wait(recvs[i]);
    if (next >= 0) sends.push_back(c.isend(next, 0, c.at(buf, parts[i].offset), parts[i].count * c.esize()));
  }
  c.wait_all(sends);
}

double cost_broadcast_chain(const CostParams& p, double n, int size) {
  double k = std::max(1.0, std::ceil(n / p.chunk_bytes));
  return (size - 2 + k) * (p.alpha + n / k * p.beta);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "chain", "pipelined chain from the root", supports_any,
                         run_broadcast_chain, cost_broadcast_chain}};
}  // namespace

}  // namespace dcomm::coll
