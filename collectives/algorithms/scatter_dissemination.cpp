// scatter[dissemination]: the root's whole buffer spreads on the call check's own rounds (broadcast[dissemination])
// and every rank keeps its block. Every rank receives n, where binomial's leaves receive n/P, so it is for small
// scatters: beyond kMaxRideBytes, or on device memory, it runs the check and then binomial. Regular scatter only.
// Cost: ⌈log₂P⌉(α + nβ) with no separate check; binomial's plus the check's otherwise.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/ride.hpp"

namespace dcomm::coll {

void run_scatter_dissemination(Context& c) {
  const Args& a = c.args;
  const std::size_t n = a.recv.count;
  const std::size_t bytes = static_cast<std::size_t>(c.size()) * n * c.esize();
  if (!rides_else_check(c, broadcast_rides(static_cast<double>(bytes)))) return run_scatter_binomial(c);
  // The root sends from its own buffer and never receives; the others receive the whole of it here.
  RideBuffer whole(c, static_cast<std::size_t>(c.size()) * n);
  char* buf = c.rank() == a.root ? static_cast<char*>(a.send.data) : whole.data();
  ride_broadcast(c, buf, bytes, a.root);
  c.copy(a.recv.data, c.at(buf, static_cast<std::size_t>(c.rank()) * n), n);
}

double cost_scatter_dissemination(const CostParams& p, double n, int size) {
  if (!broadcast_rides(n)) return cost_scatter_binomial(p, n, size) + call_check_cost(p, size);
  return log2_rounds(size) * (p.alpha + n * p.beta);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "dissemination",
                         "the root's blocks spread on the call check's rounds (small regular scatter)",
                         supports_regular, run_scatter_dissemination, cost_scatter_dissemination, true}};
}  // namespace

}  // namespace dcomm::coll
