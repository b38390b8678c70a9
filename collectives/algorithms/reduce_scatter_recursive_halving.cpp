// reduce_scatter[recursive_halving]: non-powers of two fold the first 2·rem ranks in pairs (the even rank's
// whole vector is added into the odd one's); then in round k the p2 remaining ranks swap half of their current
// block range with the rank p2/2^(k+1) away (virtual ranks) and add the half they keep; after log₂p2 rounds each
// holds its block(s) reduced, and the odd rank of each pair sends its partner's block back.
// Cost: log₂P·α + (P-1)/P·n(β + γ), plus 2α + (1 + 1/P)nβ + nγ to fold a non-power of two.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_reduce_scatter_recursive_halving(Context& c) {
  halving_reduce_scatter(c, c.work, uniform_blocks(c.args.recv.count, c.size()), /*unfold=*/true, 0);
}

double cost_reduce_scatter_recursive_halving(const CostParams& p, double n, int size) {
  int p2 = pattern::floor_pow2(size);
  double t = log2_rounds(p2) * p.alpha + fraction(size) * n * (p.beta + p.gamma);
  if (p2 != size) t += 2.0 * p.alpha + (1.0 + 1.0 / size) * n * p.beta + n * p.gamma;
  return t;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "recursive_halving", "recursive halving, non-powers of two folded",
                         supports_any, run_reduce_scatter_recursive_halving, cost_reduce_scatter_recursive_halving}};
}  // namespace

}  // namespace dcomm::coll
