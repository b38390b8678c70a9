// gather[binomial]: blocks travel up the binomial tree rooted at the root.
//   Every rank collects its subtree's blocks in relative-rank order (v = (r - root) mod P): its own first, then
//   each child's subtree share as it arrives, and sends the lot to its parent in one message. The root finally
//   puts the blocks back in rank order. Regular gather only (uniform blocks).
// Cost: ⌈log₂P⌉α + (P-1)/P·nβ + nγ: the blocks pass through a scratch buffer in relative-rank order, so the
// root copies all n bytes once more than the linear version does (γ, the per-byte reduce cost, stands in for a
// copy's). On few ranks that copy is what makes linear the faster one for large n.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_gather_binomial(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int root = a.root;
  const std::size_t n = a.send.count;
  const int v = pattern::mod(c.rank() - root, p);
  const int sub = pattern::binomial_subtree_size(c.rank(), p, root);
  Scratch held = c.scratch(static_cast<std::size_t>(sub) * n);
  c.copy(held.data(), a.send.data, n);
  pattern::TreeNode node = pattern::binomial_tree(c.rank(), p, root);
  std::vector<transport::RequestPtr> recvs;
  for (int child : node.children) {
    int cv = pattern::mod(child - root, p);
    std::size_t share = static_cast<std::size_t>(pattern::binomial_subtree_size(child, p, root)) * n;
    recvs.push_back(c.irecv(child, 0, c.at(held.data(), static_cast<std::size_t>(cv - v) * n), share * c.esize()));
  }
  c.wait_all(recvs);
  if (node.parent >= 0) {
    c.send(node.parent, 0, held.data(), static_cast<std::size_t>(sub) * n * c.esize());
    return;
  }
  for (int u = 0; u < p; ++u) {
    c.copy(c.at(a.recv.data, static_cast<std::size_t>((u + root) % p) * n),
           c.at(held.data(), static_cast<std::size_t>(u) * n), n);
  }
}

double cost_gather_binomial(const CostParams& p, double n, int size) {
  return log2_rounds(size) * p.alpha + fraction(size) * n * p.beta + n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "binomial", "binomial tree to the root (regular gather)",
                         supports_regular, run_gather_binomial, cost_gather_binomial}};
}  // namespace

}  // namespace dcomm::coll
