// broadcast[binomial]: the root sends the whole vector down a binomial tree.
//   Relative rank v = (r - root) mod P receives from v - lowbit(v), then sends to v + 2^k for every 2^k below
//   lowbit(v) (below P for the root), largest subtree first. ⌈log₂P⌉ rounds.
// Cost: ⌈log₂P⌉(α + nβ).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_broadcast_binomial(Context& c) {
  binomial_broadcast(c, static_cast<char*>(c.args.send.data), c.args.send.count, c.args.root, 0);
}

double cost_broadcast_binomial(const CostParams& p, double n, int size) {
  return log2_rounds(size) * (p.alpha + n * p.beta);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "binomial", "binomial tree from the root", supports_any,
                         run_broadcast_binomial, cost_broadcast_binomial}};
}  // namespace

}  // namespace dcomm::coll
