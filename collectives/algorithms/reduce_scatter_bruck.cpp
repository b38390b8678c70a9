// reduce_scatter[bruck]: every rank gathers every rank's whole vector on the call check's own rounds (Bruck) and
// combines its own block of the P vectors in rank order. Every rank receives (P-1)n where ring receives
// (P-1)n/P, so it is for small vectors: beyond kMaxRideBytes per round, or on device memory, it runs the check and
// then ring.
// Cost: ⌈log₂P⌉α + (P-1)n(β + 2γ) + (P-1)/P·nγ with no separate check; ring's plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_reduce_scatter_bruck(Context& c) {
  if (c.size() == 1) return;
  if (!work_rides_else_check(c)) return run_reduce_scatter_ring(c);
  // The engine copies block `rank` of c.work (recv.count elements) to recv afterwards.
  const std::size_t block = c.args.recv.count;
  ride_reduce(c, static_cast<std::size_t>(c.rank()) * block, block, true);
}

double cost_reduce_scatter_bruck(const CostParams& p, double n, int size) {
  if (size > 1 && !gather_rides(n, size)) return cost_reduce_scatter_ring(p, n, size) + call_check_cost(p, size);
  return log2_rounds(size) * p.alpha + (size - 1) * n * (p.beta + 2 * p.gamma) + fraction(size) * n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "bruck",
                         "every rank gathers all vectors (Bruck) on the call check, combines its block", supports_any,
                         run_reduce_scatter_bruck, cost_reduce_scatter_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
