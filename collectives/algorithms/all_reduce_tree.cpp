// all_reduce[tree]: binomial-tree reduce to rank 0, then binomial-tree broadcast from rank 0.
//   1. Each rank receives its children's vectors (smallest subtree first), adds them to its own in that fixed
//      order and sends the sum to its parent; after ceil(log2 P) rounds rank 0 holds the total.
//   2. Rank 0 sends the total down the same tree, so every rank ends with rank 0's bits.
// Cost: 2⌈log₂P⌉(α + nβ) + ⌈log₂P⌉nγ (few rounds, whole vectors: good for small n).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_reduce_tree(Context& c) {
  binomial_reduce(c, c.work, c.work_count, 0, 0);
  binomial_broadcast(c, c.work, c.work_count, 0, 1);
}

double cost_all_reduce_tree(const CostParams& p, double n, int size) {
  double l = log2_rounds(size);
  return 2.0 * l * (p.alpha + n * p.beta) + l * n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "tree",
                         "binomial reduce to rank 0, then binomial broadcast; few rounds", supports_any,
                         run_all_reduce_tree, cost_all_reduce_tree}};
}  // namespace

}  // namespace dcomm::coll
