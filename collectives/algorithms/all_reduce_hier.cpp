// all_reduce[hier]: two levels, for groups that span nodes (OpenMPI HAN's and NCCL's shape across nodes).
//   The vector is cut into M slices, M = the ranks on the fullest node; slice j belongs on each node to its rank
//   j mod (ranks on that node), so on a full node every rank owns one slice and on a smaller node some own several.
//   1. Within each node, every rank sends each slice to its owner, which reduces the node's parts (direct
//      reduce-scatter over shared memory).
//   2. Across nodes, the owners of slice j (one per node: "rail" j) all-reduce it with a pipelined ring, every
//      rail at once, so every rank of a full node drives the link between nodes. A rank serving several rails
//      runs them in rail order (every rank does, so they cannot wait on each other in a cycle).
//   3. Within each node, each owner sends its reduced slices to the node's other ranks.
//   Every slice is reduced in one order and copied from there, so every rank holds identical bits.
// Cost (N nodes, L ranks on the fullest node, L' on the emptiest, α_i β_i within a node, α β between nodes):
//   2(L-1)α_i + 2(L-1)/L·nβ_i + (L-1)/L·nγ  +  ⌈L/L'⌉·2(N-1)α + 2(N-1)/N·nβ + (N-1)/N·(n/L')γ
// (the rails share the node's link, so the bytes between nodes are a node's total). Only for groups on two nodes
// or more: on one node the flat algorithms run, and their choices stay what they were.

#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kGatherStep = 1;
constexpr uint32_t kRailStepBase = 2;  // rail j takes steps 2 + 2j and 3 + 2j

}  // namespace

void run_all_reduce_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  const std::vector<pattern::Block> slices = pattern::even_blocks(c.work_count, t.max_local);
  std::vector<int> owners;
  for (int j = 0; j < t.max_local; ++j) owners.push_back(t.rail_member(j, h.node));
  node_reduce_to_owners(c, c.work, slices, owners, 0);
  for (int j = 0; j < t.max_local; ++j) {
    const GroupView& rail = h.rails[static_cast<std::size_t>(j)];
    const pattern::Block& s = slices[static_cast<std::size_t>(j)];
    if (rail.rank < 0 || s.count == 0) continue;
    Context r = c.on(rail, kRailStepBase + 2 * static_cast<uint32_t>(j));
    const std::vector<pattern::Block> blocks = pattern::even_blocks(s.count, rail.size);
    char* buf = c.at(c.work, s.offset);
    ring_pass(r, buf, blocks, 0, /*reduce=*/true, 0);
    ring_pass(r, buf, blocks, 0, /*reduce=*/false, 1);
  }
  node_share_from_owners(c, c.work, slices, owners, kGatherStep);
}

double cost_all_reduce_hier(const CostParams& p, double n, int /*size*/) {
  const double l = p.local, lmin = p.min_local;
  const double within =
      2.0 * (l - 1) * p.alpha_intra + 2.0 * fraction(p.local) * n * p.beta_intra + fraction(p.local) * n * p.gamma;
  const double rails_per_rank = std::ceil(l / lmin);
  const double across = rails_per_rank * 2.0 * (p.nodes - 1) * p.alpha + 2.0 * fraction(p.nodes) * n * p.beta +
                        fraction(p.nodes) * (n / lmin) * p.gamma;
  return within + across;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "hier",
                         "two levels across nodes: node reduce-scatter, ring per rail between nodes, node all-gather",
                         supports_hier, run_all_reduce_hier, cost_all_reduce_hier}};
}  // namespace

}  // namespace dcomm::coll
