// all_reduce[ring]: ring reduce-scatter, then ring all-gather, both pipelined in chunk-sized pieces.
//   1. The vector is cut into P blocks (the first count % P one element longer). In round s = 0..P-2, rank r
//      sends block r-s-1 to rank r+1 and receives block r-s-2 from rank r-1, adding it to its own; each piece
//      is forwarded as soon as it is reduced. Rank r ends with block r reduced over every rank.
//   2. In round s = 0..P-2, rank r sends block r-s and receives block r-s-1, forwarding pieces as they land.
//      Every rank gets each block from the one rank that reduced it, so all ranks hold identical bits.
// Cost: 2(P-1)α + 2(P-1)/P·nβ + (P-1)/P·nγ (bandwidth-optimal; latency linear in P).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_reduce_ring(Context& c) {
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.work_count, c.size());
  ring_pass(c, c.work, blocks, 0, /*reduce=*/true, 0);
  ring_pass(c, c.work, blocks, 0, /*reduce=*/false, 1);
}

double cost_all_reduce_ring(const CostParams& p, double n, int size) {
  return 2.0 * (size - 1) * p.alpha + 2.0 * fraction(size) * n * p.beta + fraction(size) * n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "ring",
                         "ring reduce-scatter then ring all-gather, pipelined; bandwidth-optimal", supports_any,
                         run_all_reduce_ring, cost_all_reduce_ring}};
}  // namespace

}  // namespace dcomm::coll
