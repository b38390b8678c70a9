// barrier[hier]: two levels, for groups that span nodes: a dissemination barrier within each node, then one
// among the nodes' leaders (lowest ranks), then one more within each node, which no rank leaves before its
// leader has come back from the leaders' (so before every rank of the group has arrived).
// Cost (N nodes, L ranks on the fullest; α_i within a node, α between nodes): 2⌈log₂L⌉α_i + ⌈log₂N⌉α.
// It does not carry the engine's call check, which is itself a barrier over the whole group: with checks on,
// the cost model charges it for the check and prefers dissemination, whose rounds are the check's own.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kReleaseStep = 16;  // after the first node barrier's ⌈log₂L⌉ <= 8 steps

}  // namespace

void run_barrier_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  auto none = [](uint8_t&, uint8_t) {};
  Context local = c.on(h.node_view, 0);
  agree(local, 0, uint8_t{0}, none);
  if (h.leaders.rank >= 0) {
    Context leaders = c.on(h.leaders, 0);
    agree(leaders, 0, uint8_t{0}, none);
  }
  agree(local, kReleaseStep, uint8_t{0}, none);
}

double cost_barrier_hier(const CostParams& p, double /*bytes*/, int /*size*/) {
  return 2.0 * log2_rounds(p.local) * p.alpha_intra + log2_rounds(p.nodes) * p.alpha;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBarrier, "hier",
                         "two levels across nodes: within each node, among the leaders, within each node again",
                         supports_hier, run_barrier_hier, cost_barrier_hier}};
}  // namespace

}  // namespace dcomm::coll
