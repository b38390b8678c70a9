// reduce[bruck]: all_reduce[bruck] of which only the root keeps the result: every rank gathers every input on the
// call check's own rounds (Bruck), and the root combines them in rank order. Every rank receives (P-1)n, where
// binomial's non-root ranks receive at most log P vectors, so it is for small vectors: beyond kMaxRideBytes per
// round, or on device memory, it runs the check and then binomial.
// Cost: ⌈log₂P⌉α + (P-1)n(β + 3γ) with no separate check; binomial's plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_reduce_bruck(Context& c) {
  if (c.size() == 1) return;
  if (!work_rides_else_check(c)) return run_reduce_binomial(c);
  ride_reduce(c, 0, c.work_count, c.rank() == c.args.root);
}

double cost_reduce_bruck(const CostParams& p, double n, int size) {
  if (size > 1 && !gather_rides(n, size)) return cost_reduce_binomial(p, n, size) + call_check_cost(p, size);
  return log2_rounds(size) * p.alpha + (size - 1) * n * (p.beta + 3 * p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "bruck",
                         "every rank gathers all inputs (Bruck) riding on the call check; the root combines them",
                         supports_any, run_reduce_bruck, cost_reduce_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
