// broadcast[scatter_allgather]: van de Geijn's broadcast for long vectors.
//   1. The vector is cut into P blocks; block v belongs to relative rank v = (r - root) mod P. The root
//      scatters them down a binomial tree: each rank receives its whole subtree's blocks (contiguous in relative
//      order) from its parent and passes each child its subtree's share.
//   2. A ring all-gather (pipelined) gives every rank every block.
// Cost: (⌈log₂P⌉ + P - 1)α + 2(P-1)/P·nβ.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_broadcast_scatter_allgather(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  const int root = c.args.root;
  if (p == 1) return;
  char* buf = static_cast<char*>(c.args.send.data);
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.args.send.count, p);
  auto subtree_span = [&](int rank) {
    int v = pattern::mod(rank - root, p);
    return pattern::span(blocks, v, v + pattern::binomial_subtree_size(rank, p, root));
  };
  pattern::TreeNode node = pattern::binomial_tree(r, p, root);
  if (node.parent >= 0) {
    pattern::Block mine = subtree_span(r);
    c.recv(node.parent, 0, c.at(buf, mine.offset), mine.count * c.esize());
  }
  std::vector<transport::RequestPtr> sends;
  for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) {
    pattern::Block theirs = subtree_span(*it);
    sends.push_back(c.isend(*it, 0, c.at(buf, theirs.offset), theirs.count * c.esize()));
  }
  c.wait_all(sends);
  ring_pass(c, buf, blocks, -root, /*reduce=*/false, 1);
}

double cost_broadcast_scatter_allgather(const CostParams& p, double n, int size) {
  return (log2_rounds(size) + size - 1) * p.alpha + 2.0 * fraction(size) * n * p.beta;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "scatter_allgather",
                         "binomial scatter then ring all-gather (van de Geijn)", supports_any,
                         run_broadcast_scatter_allgather, cost_broadcast_scatter_allgather}};
}  // namespace

}  // namespace dcomm::coll
