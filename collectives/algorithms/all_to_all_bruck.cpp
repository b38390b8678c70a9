// all_to_all[bruck]: every rank gathers every rank's whole send buffer on the call check's own rounds (Bruck's
// all-gather, towards r + 2^k) and keeps block r of each. Every rank receives (P-1)n where pairwise receives
// (P-1)/P·n, so it is for small exchanges: beyond kMaxRideBytes per round, or on device memory, it runs the check
// and then pairwise. Regular all_to_all only (uniform blocks); in place works, the send buffer being copied first.
// Cost: ⌈log₂P⌉α + (P-1)n(β + γ) with no separate check; pairwise's plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_all_to_all_bruck(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const std::size_t n = a.send.count;  // P blocks of n / P
  if (!rides_else_check(c, gather_rides(static_cast<double>(n * c.esize()), p))) return run_all_to_all_pairwise(c);
  RideBuffer all(c, static_cast<std::size_t>(p) * n);
  c.copy(all.data(), a.send.data, n);
  ride_gather(c, all.data(), n * c.esize());
  const std::size_t block = n / static_cast<std::size_t>(p);
  for (int q = 0; q < p; ++q) {  // rank q's buffer sits at place (r - q) mod P
    const std::size_t place = static_cast<std::size_t>(pattern::mod(c.rank() - q, p));
    c.copy(c.at(a.recv.data, static_cast<std::size_t>(q) * block),
           c.at(all.data(), place * n + static_cast<std::size_t>(c.rank()) * block), block);
  }
}

double cost_all_to_all_bruck(const CostParams& p, double n, int size) {
  if (!gather_rides(n, size)) return cost_all_to_all_pairwise(p, n, size) + call_check_cost(p, size);
  return log2_rounds(size) * p.alpha + (size - 1) * n * (p.beta + p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllToAll, "bruck",
                         "every rank gathers all send buffers (Bruck) on the call check's rounds (small, regular)",
                         supports_regular, run_all_to_all_bruck, cost_all_to_all_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
