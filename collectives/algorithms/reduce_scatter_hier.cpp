// reduce_scatter[hier]: two levels, for groups that span nodes.
//   Rail j links, on every node, its rank j mod (ranks on that node) (collectives/topology.hpp); rank q's block
//   travels on rail (q's local rank), whose member on q's own node is q itself.
//   1. Within each node: every block is reduced over the node's ranks by the node's member of its rail (a direct
//      reduce-scatter over shared memory; every rank of a full node reduces one block per node).
//   2. Between nodes: each rank sends the node results it holds to the blocks' ranks, and each rank adds the
//      other nodes' results for its block to its own node's, in node order. Every rail at once, in chunk-sized
//      pieces (post_pieces: eager over TCP), each added as it lands.
// Cost (N nodes, L ranks on the fullest; α_i β_i within a node, α β between nodes; n the scattered bytes):
//   N(L-1)α_i + (L-1)/L·n(β_i + γ) + (N-1)α + (N-1)/N·nβ + (N-1)/P·nγ.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kNodeStep = 0;
constexpr uint32_t kAcrossStep = 1;

}  // namespace

void run_reduce_scatter_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  const std::size_t count = c.args.recv.count;
  const std::vector<pattern::Block> blocks = uniform_blocks(count, c.size());
  std::vector<int> reducers;
  for (int q = 0; q < c.size(); ++q) reducers.push_back(t.rail_member(t.local_of[static_cast<std::size_t>(q)], h.node));
  node_reduce_to_owners(c, c.work, blocks, reducers, kNodeStep);
  if (count == 0) return;
  std::vector<transport::RequestPtr> sends;
  for (int q = 0; q < c.size(); ++q) {
    if (reducers[static_cast<std::size_t>(q)] == c.rank() && t.node_of[static_cast<std::size_t>(q)] != h.node) {
      post_pieces(c, true, q, kAcrossStep, c.at(c.work, blocks[static_cast<std::size_t>(q)].offset), count, sends);
    }
  }
  Scratch tmp = c.scratch(count * static_cast<std::size_t>(t.node_count() - 1));
  std::vector<transport::RequestPtr> recvs;  // node after node, each in pieces (post_pieces)
  for (int n = 0, i = 0; n < t.node_count(); ++n) {
    if (n != h.node)
      post_pieces(c, false, t.rail_member(h.local, n), kAcrossStep, c.at(tmp.data(), count * i++), count, recvs);
  }
  // Each piece is added as it lands, in node order (the same order on every rank, so the bits agree).
  char* own = c.at(c.work, blocks[static_cast<std::size_t>(c.rank())].offset);
  const std::vector<pattern::Block> parts = pattern::pieces(pattern::Block{0, count}, c.chunk_elems());
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    const pattern::Block& pc = parts[i % parts.size()];
    c.wait(recvs[i]);
    c.reduce(c.at(own, pc.offset), c.at(tmp.data(), count * (i / parts.size()) + pc.offset), pc.count);
  }
  c.wait_all(sends);
}

double cost_reduce_scatter_hier(const CostParams& p, double n, int size) {
  return p.nodes * (p.local - 1) * p.alpha_intra + fraction(p.local) * n * (p.beta_intra + p.gamma) +
         (p.nodes - 1) * p.alpha + fraction(p.nodes) * n * p.beta + (p.nodes - 1) * n / size * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "hier",
                         "two levels across nodes: reduce within each node, then across nodes on every rail at once",
                         supports_hier, run_reduce_scatter_hier, cost_reduce_scatter_hier}};
}  // namespace

}  // namespace dcomm::coll
