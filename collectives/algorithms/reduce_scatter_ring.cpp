// reduce_scatter[ring]: the reduce-scatter half of ring all-reduce over the P blocks of `send`: in round
// s = 0..P-2 rank r sends (its partial sum of) block r-s-1 to rank r+1 and adds block r-s-2 from rank r-1,
// pipelined in chunk-sized pieces; rank r ends with block r reduced over every rank.
// Cost: (P-1)α + (P-1)/P·n(β + γ) (n = the bytes of `send`).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_reduce_scatter_ring(Context& c) {
  ring_pass(c, c.work, uniform_blocks(c.args.recv.count, c.size()), 0, /*reduce=*/true, 0);
}

double cost_reduce_scatter_ring(const CostParams& p, double n, int size) {
  return (size - 1) * p.alpha + fraction(size) * n * (p.beta + p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "ring", "ring, pipelined; bandwidth-optimal", supports_any,
                         run_reduce_scatter_ring, cost_reduce_scatter_ring}};
}  // namespace

}  // namespace dcomm::coll
