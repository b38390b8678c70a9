// all_gather[bruck]: Bruck's algorithm, ⌈log₂P⌉ rounds for any P.
//   Rank r keeps its blocks in a scratch buffer rotated so that place i holds rank (r + i) mod P's block, its own
//   first. In round k it sends its first min(2^k, P - 2^k) blocks to rank r - 2^k and appends as many from rank
//   r + 2^k; after the last round it copies place i to block (r + i) mod P of `recv`.
//   When every round's blocks fit kMaxRideBytes (host memory), the rounds are the call check's own (ride.hpp), run
//   the other way round (to r + 2^k), and the engine sends no separate check.
// Cost: ⌈log₂P⌉α + (P-1)/P·nβ, plus a local copy of n; plus the separate check when it does not ride.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_all_gather_bruck(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const std::size_t n = a.send.count;
  if (p > 1 && rides_else_check(c, gather_rides(static_cast<double>(n * c.esize()), p))) {
    return ride_all_gather(c, a.send.data, n, a.recv.data);  // on the check's rounds, which run towards r + 2^k
  }
  Scratch held = c.scratch(static_cast<std::size_t>(p) * n);
  c.copy(held.data(), a.send.data, n);
  uint32_t step = 0;
  for (const pattern::BruckStep& s : pattern::bruck_schedule(c.rank(), p)) {
    auto count = static_cast<std::size_t>(s.blocks) * n;
    c.sendrecv(s.to, held.data(), count * c.esize(), s.from,
               c.at(held.data(), static_cast<std::size_t>(s.blocks_held) * n), count * c.esize(), step++);
  }
  for (int i = 0; i < p; ++i) {
    c.copy(c.at(a.recv.data, static_cast<std::size_t>((c.rank() + i) % p) * n),
           c.at(held.data(), static_cast<std::size_t>(i) * n), n);
  }
}

double cost_all_gather_bruck(const CostParams& p, double n, int size) {
  double own = log2_rounds(size) * p.alpha + fraction(size) * n * p.beta + n * p.gamma;
  return size > 1 && gather_rides(n / size, size) ? own : own + call_check_cost(p, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "bruck",
                         "Bruck's log-round all-gather for any group size; small ones ride on the call check",
                         supports_any, run_all_gather_bruck, cost_all_gather_bruck, true}};
}  // namespace

}  // namespace dcomm::coll
