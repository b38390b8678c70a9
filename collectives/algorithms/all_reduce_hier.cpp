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
//   Pipelined in segments (2 chunk-sized pieces per ring block, so 2·N·L chunks; a call of less than 4 such
//   segments in 4, of at least 256 KiB each): segment k's node reduce-scatter and segment k-1's node all-gather
//   run while the rails' messages cross the link (collectives/rail_ring.hpp has the stages and why their one
//   global order cannot deadlock); unpipelined, the link idled through every node phase.
// Cost (N nodes, L ranks on the fullest node, L' on the emptiest, α_i β_i within a node, α β between nodes):
//   within(n) = 2(L-1)α_i + 2(L-1)/L·nβ_i + (L-1)/L·nγ;  across(n) = ⌈L/L'⌉·2(N-1)α + 2(N-1)/N·nβ + (N-1)/N·(n/L')γ
//   within(n) + across(n): an upper bound, the pipeline hides the first behind the second on separate links.
// (the rails share the node's link, so the bytes between nodes are a node's total). Only for groups on two nodes
// or more: on one node the flat algorithms run, and their choices stay what they were.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/rail_ring.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kGatherStep = 1;
constexpr uint32_t kRailStepBase = 2;  // rail j takes steps 2 + 2j and 3 + 2j
// Ring blocks per rail per segment, in chunk-sized pieces: a segment is the node's share of the pipeline.
constexpr std::size_t kPiecesPerBlock = 2;

// One segment's slices (absolute offsets in c.work), the node's part of each rail.
std::vector<pattern::Block> slices_of(const pattern::Block& segment, int rails) {
  std::vector<pattern::Block> slices = pattern::even_blocks(segment.count, rails);
  for (pattern::Block& b : slices) b.offset += segment.offset;
  return slices;
}

// A pipeline needs a few segments to overlap anything: a call of up to kMinSegments full segments is cut into
// kMinSegments, down to kMinSegmentBytes (below that a call is latency-bound, and more messages cost more than
// the overlap gains).
constexpr std::size_t kMinSegments = 4;
constexpr std::size_t kMinSegmentBytes = 256 * 1024;

std::size_t segment_elems(const Context& c, int nodes, int rails) {
  const std::size_t full =
      c.chunk_elems() * kPiecesPerBlock * static_cast<std::size_t>(nodes) * static_cast<std::size_t>(rails);
  const std::size_t floor = std::max<std::size_t>(1, kMinSegmentBytes / c.esize());
  const std::size_t quarter = (c.work_count + kMinSegments - 1) / kMinSegments;
  return std::min(full, std::max(floor, quarter));
}

}  // namespace

void run_all_reduce_hier(Context& c) {
  const Hierarchy& h = *c.view.hierarchy;
  const Topology& t = h.topo;
  std::vector<int> owners;
  for (int j = 0; j < t.max_local; ++j) owners.push_back(t.rail_member(j, h.node));
  const std::size_t seg = segment_elems(c, t.node_count(), t.max_local);
  std::vector<pattern::Block> segments;
  if (c.work_count > 0) segments = pattern::pieces(pattern::Block{0, c.work_count}, seg);
  // The rings this rank runs for one segment, in rail order.
  auto rings_of = [&](const pattern::Block& segment) {
    std::vector<RailRing> rings;
    const std::vector<pattern::Block> slices = slices_of(segment, t.max_local);
    for (int j = 0; j < t.max_local; ++j) {
      const GroupView& rail = h.rails[static_cast<std::size_t>(j)];
      const pattern::Block& s = slices[static_cast<std::size_t>(j)];
      if (rail.rank < 0 || s.count == 0) continue;
      rings.emplace_back(c.on(rail, kRailStepBase + 2 * static_cast<uint32_t>(j)), c.at(c.work, s.offset), s.count);
    }
    return rings;
  };
  // Segment k's node reduce-scatter runs while segment k-1's reduce pass crosses the link, and segment k-1's
  // gather pass and node all-gather while segment k's reduce pass does.
  std::vector<RailRing> before;  // segment k-1's rings
  for (std::size_t k = 0; k <= segments.size(); ++k) {
    std::vector<RailRing> now;
    if (k < segments.size()) {
      node_reduce_to_owners(c, c.work, slices_of(segments[k], t.max_local), owners, 0);
      now = rings_of(segments[k]);
    }
    for (RailRing& r : before) r.reduce();
    for (RailRing& r : now) r.start();
    if (k > 0) {
      for (RailRing& r : before) r.finish();
      node_share_from_owners(c, c.work, slices_of(segments[k - 1], t.max_local), owners, kGatherStep);
    }
    before = std::move(now);
  }
}

double cost_all_reduce_hier(const CostParams& p, double n, int /*size*/) {
  const double l = p.local, lmin = p.min_local;
  const double within =
      2.0 * (l - 1) * p.alpha_intra + 2.0 * fraction(p.local) * n * p.beta_intra + fraction(p.local) * n * p.gamma;
  const double rails_per_rank = std::ceil(l / lmin);
  const double across = rails_per_rank * 2.0 * (p.nodes - 1) * p.alpha + 2.0 * fraction(p.nodes) * n * p.beta +
                        fraction(p.nodes) * (n / lmin) * p.gamma;
  // Charged in sequence, an upper bound: the segments hide the node phases behind the link only where the two are
  // different links, which one link class (no intra-node pair measured) does not say.
  return within + across;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "hier",
                         "two levels across nodes: node reduce-scatter, ring per rail between nodes, node all-gather",
                         supports_hier, run_all_reduce_hier, cost_all_reduce_hier}};
}  // namespace

}  // namespace dcomm::coll
