// gather[bruck]: every rank gathers every block on the call check's own rounds (Bruck's all-gather, towards
// r + 2^k) and the root keeps them. Every rank receives (P-1)/P·n, where binomial's leaves receive nothing, so it is
// for small gathers: beyond kMaxRideBytes per round, or on device memory, it runs the check and then binomial.
// Regular gather only (uniform blocks).
// Cost: ⌈log₂P⌉α + (P-1)/P·nβ + nγ (the rotation) with no separate check; binomial's plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_gather_bruck(Context& c) {
  const Args& a = c.args;
  if (!rides_else_check(c, gather_rides(static_cast<double>(a.send.count * c.esize()), c.size()))) {
    return run_gather_binomial(c);
  }
  ride_all_gather(c, a.send.data, a.send.count, c.rank() == a.root ? a.recv.data : nullptr);
}

double cost_gather_bruck(const CostParams& p, double n, int size) {
  if (!gather_rides(n / size, size)) return cost_gather_binomial(p, n, size) + call_check_cost(p, size);
  return log2_rounds(size) * p.alpha + fraction(size) * n * p.beta + n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "bruck",
                         "every rank gathers all blocks (Bruck) on the call check's rounds (small regular gather)",
                         supports_regular, run_gather_bruck, cost_gather_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
