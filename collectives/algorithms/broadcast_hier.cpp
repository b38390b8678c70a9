// broadcast[hier]: two levels, for groups that span nodes.
//   1. Between nodes: a binomial tree over one rank per node - the root on its node, the leader (lowest rank)
//      on the others - rooted at the root.
//   2. Within each node: a binomial tree from that rank over shared memory, every node at once.
// Cost (N nodes, L ranks on the fullest; α_i β_i within a node, α β between nodes):
//   ⌈log₂N⌉(α + nβ) + ⌈log₂L⌉(α_i + nβ_i): the data crosses to each node once, where a flat tree may send it
//   between nodes at every level.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

void run_broadcast_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  char* buf = static_cast<char*>(c.args.send.data);
  const std::size_t count = c.args.send.count;
  const std::vector<int> reps = node_representatives(h, c.args.root);
  const int root_node = t.node_of[static_cast<std::size_t>(c.args.root)];
  // The leaders' view is the group's, built once; a root that leads no node needs its own (a vector of N).
  GroupView own;
  const GroupView* across = &across_view(c.view, h, reps, root_node, own);
  if (across->rank >= 0) {
    Context a = c.on(*across, 0);
    binomial_broadcast(a, buf, count, root_node, 0);
  }
  Context local = c.on(h.node_view, 1);
  binomial_broadcast(local, buf, count, t.local_of[static_cast<std::size_t>(reps[static_cast<std::size_t>(h.node)])],
                     0);
}

double cost_broadcast_hier(const CostParams& p, double n, int /*size*/) {
  return log2_rounds(p.nodes) * (p.alpha + n * p.beta) + log2_rounds(p.local) * (p.alpha_intra + n * p.beta_intra);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "hier",
                         "two levels across nodes: tree between nodes, then tree within each node", supports_hier,
                         run_broadcast_hier, cost_broadcast_hier}};
}  // namespace

}  // namespace dcomm::coll
