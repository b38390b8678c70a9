// reduce[binomial]: each rank combines its children's vectors (smallest subtree first) into its own and sends
// the result to its parent in the binomial tree rooted at the root; ⌈log₂P⌉ rounds.
// Cost: ⌈log₂P⌉(α + nβ + nγ).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_reduce_binomial(Context& c) { binomial_reduce(c, c.work, c.work_count, c.args.root, 0); }

double cost_reduce_binomial(const CostParams& p, double n, int size) {
  return log2_rounds(size) * (p.alpha + n * p.beta + n * p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "binomial", "binomial tree to the root", supports_any,
                         run_reduce_binomial, cost_reduce_binomial}};
}  // namespace

}  // namespace dcomm::coll
