// all_reduce[bruck]: every rank gathers every rank's input with Bruck's all-gather and reduces the P inputs itself,
// in rank order, so every rank computes the same bits, in ⌈log₂P⌉ rounds for any P (no folding).
//   Round k = 0..⌈log₂P⌉-1: send the first min(2^k, P - 2^k) inputs held to rank r + 2^k and append as many from
//   rank r - 2^k (place i holds rank (r - i) mod P's input); then combine the inputs of ranks 0, 1, ..., P-1.
//   The rounds are the call check's own (Context::call, CheckRider): where another algorithm pays the check's
//   rounds and then its own, this one pays one set. When a round would carry more than kMaxRideBytes, or the
//   memory is on a device, it runs the check and then butterfly instead.
// Cost: ⌈log₂P⌉α + (P-1)n(β + γ) + 2(P-1)nγ for copying the inputs in and out of the check's messages; butterfly's
// plus the check's otherwise.

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_check.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_all_reduce_bruck(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  if (!c.device().is_host() || !gather_rides(static_cast<double>(bytes), p)) {
    if (c.call != nullptr) check_calls_match(c, c.call);
    return run_all_reduce_butterfly(c);
  }
  RideBuffer held(c, static_cast<std::size_t>(p) * n);  // every input lands here; small calls keep it on the stack
  std::memcpy(held.data(), c.work, bytes);
  ride_gather(c, held.data(), bytes);
  auto input_of = [&](int q) { return held.data() + static_cast<std::size_t>(pattern::mod(r - q, p)) * bytes; };
  if (r != 0) std::memcpy(c.work, input_of(0), bytes);
  for (int q = 1; q < p; ++q) c.reduce(c.work, input_of(q), n);
}

double cost_all_reduce_bruck(const CostParams& p, double n, int size) {
  if (size > 1 && !gather_rides(n, size)) return cost_all_reduce_butterfly(p, n, size) + call_check_cost(p, size);
  double others = size - 1;
  return log2_rounds(size) * p.alpha + others * n * (p.beta + 3 * p.gamma);
}

}  // namespace dcomm::coll
