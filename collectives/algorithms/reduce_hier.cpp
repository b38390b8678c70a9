// reduce[hier]: two levels, for groups that span nodes.
//   1. Within each node: a binomial-tree reduce over shared memory to one rank - the root on its node, the
//      leader (lowest rank) on the others - every node at once.
//   2. Between nodes: a binomial-tree reduce of those ranks' node results to the root.
// Cost (N nodes, L ranks on the fullest; α_i β_i within a node, α β between nodes):
//   ⌈log₂L⌉(α_i + nβ_i + nγ) + ⌈log₂N⌉(α + nβ + nγ).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

void run_reduce_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  const std::vector<int> reps = node_representatives(h, c.args.root);
  const int root_node = t.node_of[static_cast<std::size_t>(c.args.root)];
  Context local = c.on(h.node_view, 0);
  binomial_reduce(local, c.work, c.work_count,
                  t.local_of[static_cast<std::size_t>(reps[static_cast<std::size_t>(h.node)])], 0);
  GroupView own;
  const GroupView* across = &across_view(c.view, h, reps, root_node, own);
  if (across->rank >= 0) {
    Context a = c.on(*across, 1);
    binomial_reduce(a, c.work, c.work_count, root_node, 0);
  }
}

double cost_reduce_hier(const CostParams& p, double n, int /*size*/) {
  return log2_rounds(p.local) * (p.alpha_intra + n * p.beta_intra + n * p.gamma) +
         log2_rounds(p.nodes) * (p.alpha + n * p.beta + n * p.gamma);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "hier",
                         "two levels across nodes: tree within each node, then tree between nodes", supports_hier,
                         run_reduce_hier, cost_reduce_hier}};
}  // namespace

}  // namespace dcomm::coll
