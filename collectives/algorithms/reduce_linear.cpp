// reduce[linear]: every rank sends its vector to the root, which combines them in rank order.
// Cost: (P-1)(α + nβ + nγ): the root's link and its reductions serialise; only for tiny P or comparison.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_reduce_linear(Context& c) {
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  const int root = c.args.root;
  if (c.rank() != root) {
    c.send(root, 0, c.work, bytes);
    return;
  }
  Scratch tmp = c.scratch(n);
  for (int i = 0; i < c.size(); ++i) {
    if (i == root) continue;
    c.recv(i, 0, tmp.data(), bytes);
    c.reduce(c.work, tmp.data(), n);
  }
}

double cost_reduce_linear(const CostParams& p, double n, int size) {
  return (size - 1) * (p.alpha + n * p.beta + n * p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "linear", "everyone sends to the root, which combines in rank order",
                         supports_any, run_reduce_linear, cost_reduce_linear}};
}  // namespace

}  // namespace dcomm::coll
