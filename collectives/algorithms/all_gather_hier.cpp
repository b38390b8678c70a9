// all_gather[hier]: two levels, for groups that span nodes.
//   Rail j links, on every node, its rank j mod (ranks on that node) (collectives/topology.hpp).
//   1. Between nodes: local rank j sends its block to the other members of rail j, and every member of rail j
//      receives the other nodes' local-rank-j blocks; every rail at once, so every rank of a full node drives
//      the link between nodes. Blocks travel in chunk-sized pieces (post_pieces: eager over TCP).
//   2. Within each node: every rank sends what it holds (its block, and what its rails brought) to the node's
//      other ranks, straight into their place in the output.
// Cost (N nodes, L ranks on the fullest; α_i β_i within a node, α β between nodes; n the gathered bytes):
//   (N-1)α + (N-1)/N·nβ + N(L-1)α_i + (L-1)/L·nβ_i.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kShareStep = 0;
constexpr uint32_t kRailStepBase = 1;  // rail j: step 1 + j

}  // namespace

void run_all_gather_hier(Context& c) {
  const Args& a = c.args;
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  char* out = static_cast<char*>(a.recv.data);
  const std::vector<pattern::Block> blocks = uniform_blocks(a.send.count, c.size());
  const pattern::Block& mine = blocks[static_cast<std::size_t>(c.rank())];
  c.copy(c.at(out, mine.offset), a.send.data, a.send.count);
  std::vector<transport::RequestPtr> reqs;
  for (int j = 0; j < t.max_local; ++j) {
    if (h.rails[static_cast<std::size_t>(j)].rank < 0) continue;
    const uint32_t step = kRailStepBase + static_cast<uint32_t>(j);
    for (int n = 0; n < t.node_count(); ++n) {
      const auto& ranks = t.nodes[static_cast<std::size_t>(n)];
      if (n == h.node || static_cast<std::size_t>(j) >= ranks.size()) continue;
      const int from = ranks[static_cast<std::size_t>(j)];
      post_pieces(c, false, t.rail_member(j, n), step, c.at(out, blocks[static_cast<std::size_t>(from)].offset),
                  a.send.count, reqs);
    }
    if (j != h.local) continue;  // this rank's own block travels on its own rail only
    for (int n = 0; n < t.node_count(); ++n) {
      if (n != h.node) post_pieces(c, true, t.rail_member(j, n), step, c.at(out, mine.offset), a.send.count, reqs);
    }
  }
  c.wait_all(reqs);
  // Who holds each block on this node now: its own rank, or the member of its rail here.
  std::vector<int> holders;
  for (int q = 0; q < c.size(); ++q) {
    holders.push_back(t.node_of[static_cast<std::size_t>(q)] == h.node
                          ? q
                          : t.rail_member(t.local_of[static_cast<std::size_t>(q)], h.node));
  }
  node_share_from_owners(c, out, blocks, holders, kShareStep);
}

double cost_all_gather_hier(const CostParams& p, double n, int /*size*/) {
  return (p.nodes - 1) * p.alpha + fraction(p.nodes) * n * p.beta + p.nodes * (p.local - 1) * p.alpha_intra +
         fraction(p.local) * n * p.beta_intra;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "hier",
                         "two levels across nodes: blocks cross on every rail at once, then spread within each node",
                         supports_hier, run_all_gather_hier, cost_all_gather_hier}};
}  // namespace

}  // namespace dcomm::coll
