// scatter[binomial]: the root's blocks travel down the binomial tree rooted at the root.
//   The root lays its blocks out in relative-rank order (v = (r - root) mod P). Every other rank receives its
//   subtree's blocks (consecutive relative ranks) from its parent in one message, sends each child its
//   subtree's share (largest first) and keeps the first block. Regular scatter only (uniform blocks).
// Cost: ⌈log₂P⌉α + (P-1)/P·nβ + nγ: the blocks pass through a scratch buffer in relative-rank order, so the
// root copies all n bytes once more than the linear version does (γ, the per-byte reduce cost, stands in for a
// copy's). On few ranks that copy is what makes linear the faster one for large n.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_scatter_binomial(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int root = a.root;
  const std::size_t n = a.recv.count;
  const int v = pattern::mod(c.rank() - root, p);
  const int sub = pattern::binomial_subtree_size(c.rank(), p, root);
  Scratch held = c.scratch(static_cast<std::size_t>(sub) * n);
  pattern::TreeNode node = pattern::binomial_tree(c.rank(), p, root);
  if (c.rank() == root) {
    for (int u = 0; u < p; ++u) {
      c.copy(c.at(held.data(), static_cast<std::size_t>(u) * n),
             c.at(a.send.data, static_cast<std::size_t>((u + root) % p) * n), n);
    }
  } else {
    c.recv(node.parent, 0, held.data(), static_cast<std::size_t>(sub) * n * c.esize());
  }
  std::vector<transport::RequestPtr> sends;
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    int cv = pattern::mod(*it - root, p);
    std::size_t share = static_cast<std::size_t>(pattern::binomial_subtree_size(*it, p, root)) * n;
    sends.push_back(c.isend(*it, 0, c.at(held.data(), static_cast<std::size_t>(cv - v) * n), share * c.esize()));
  }
  c.wait_all(sends);
  c.copy(a.recv.data, held.data(), n);
}

double cost_scatter_binomial(const CostParams& p, double n, int size) {
  return log2_rounds(size) * p.alpha + fraction(size) * n * p.beta + n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "binomial", "binomial tree from the root (regular scatter)",
                         supports_regular, run_scatter_binomial, cost_scatter_binomial}};
}  // namespace

}  // namespace dcomm::coll
