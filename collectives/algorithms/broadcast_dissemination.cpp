// broadcast[dissemination]: the root's data spreads on the call check's own rounds.
//   Round k = 0..⌈log₂P⌉-1: the ranks that hold the data (relative ranks below 2^k) send it to rank r + 2^k with
//   their call descriptor, the others send the descriptor alone; after the last round every rank holds it. Where
//   binomial pays the check's rounds and then its own, this pays one set. Beyond kMaxRideBytes, or on device
//   memory, it runs the check and then binomial.
// Cost: ⌈log₂P⌉(α + nβ), binomial's without the separate check; binomial's plus the check's beyond the limit.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_broadcast_dissemination(Context& c) {
  if (c.size() == 1) return;
  const std::size_t bytes = c.args.send.bytes();
  if (!rides_else_check(c, broadcast_rides(static_cast<double>(bytes)))) return run_broadcast_binomial(c);
  ride_broadcast(c, static_cast<char*>(c.args.send.data), bytes, c.args.root);
}

double cost_broadcast_dissemination(const CostParams& p, double n, int size) {
  double own = cost_broadcast_binomial(p, n, size);
  return broadcast_rides(n) ? own : own + call_check_cost(p, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "dissemination",
                         "the root's data spreads on the call check's rounds (small messages)", supports_any,
                         run_broadcast_dissemination, cost_broadcast_dissemination, true}};
}  // namespace

}  // namespace dcomm::coll
