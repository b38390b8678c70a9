// all_reduce[bruck]: every rank gathers every rank's input with Bruck's all-gather and reduces the P inputs itself,
// in rank order, so every rank computes the same bits, in ⌈log₂P⌉ rounds for any P (no folding).
//   Round k = 0..⌈log₂P⌉-1: send the first min(2^k, P - 2^k) inputs held to rank r + 2^k and append as many from
//   rank r - 2^k (place i holds rank (r - i) mod P's input); then combine the inputs of ranks 0, 1, ..., P-1.
//   The rounds are the call check's own (Context::call, CheckRider): where another algorithm pays the check's
//   rounds and then its own, this one pays one set. When a round would carry more than kMaxRideBytes, or the
//   memory is on a device, it runs the check and then butterfly instead.
// Cost: ⌈log₂P⌉α + (P-1)n(β + γ) + 2(P-1)nγ for copying the inputs in and out of the check's messages; butterfly's
// plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_all_reduce_bruck(Context& c) {
  if (c.size() == 1) return;
  if (!work_rides_else_check(c)) return run_all_reduce_butterfly(c);
  ride_reduce(c, 0, c.work_count, true);
}

double cost_all_reduce_bruck(const CostParams& p, double n, int size) {
  if (size > 1 && !gather_rides(n, size)) return cost_all_reduce_butterfly(p, n, size) + call_check_cost(p, size);
  double others = size - 1;
  return log2_rounds(size) * p.alpha + others * n * (p.beta + 3 * p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "bruck",
                         "every rank gathers all inputs (Bruck) riding on the call check, reduces in rank order",
                         supports_any, run_all_reduce_bruck, cost_all_reduce_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
