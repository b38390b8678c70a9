#pragma once
// Which ranks of a group share a node, and the views a two-level (hierarchical) algorithm runs its phases on.
// A node is a host id (rendezvous: DCOMM_HOST_ID, else hostname and network namespace), read from the PeerInfo
// every rank published at mesh setup, so every rank derives the same topology with no message. The views share
// the group's mesh, tag context and call number: a hierarchical algorithm keeps its phases apart by step
// (Context::on), so building them takes no collective round, no store key and none of the world's 2047 tag
// contexts, and they are built once per group (Engine::create) and kept with it.

#include <memory>
#include <string>
#include <vector>

#include "collectives/engine.hpp"

namespace dcomm::coll {

struct Topology {
  /// Group ranks per node, ascending; nodes ordered by their lowest rank, so node 0 holds group rank 0.
  std::vector<std::vector<int>> nodes;
  std::vector<std::string> host_ids;  ///< per node
  std::vector<int> node_of;           ///< per group rank
  std::vector<int> local_of;          ///< per group rank: its index on its node
  int max_local = 1;                  ///< ranks on the fullest node
  int min_local = 1;                  ///< ranks on the emptiest node
  /// Some rank shares its cores with others of its node (transports/placement.hpp: from every rank's affinity, so
  /// alike on every rank): 3 or 4 ranks on 2 cores. The cost model prices cross-core reads differently then.
  /// Set by build_hierarchy (not by topology_of).
  bool shares_cores = false;
  /// One-node groups: plain stores into a shared-memory window reach another core faster than non-temporal ones
  /// (collectives/window_probe.hpp: measured at Engine::create, alike on every rank).
  bool cached_windows = false;
  /// The same for small calls (WindowProbe::cached_small: up to kShmSmallCachedBytes): true where cached_windows.
  bool cached_small_windows = false;
  /// The probe's time for its pattern with non-temporal stores (1 MiB a rank in, barrier, out; seconds; 0 where
  /// not measured): what a round of plain stores is held against (window_stores_slow).
  double window_streamed_seconds = 0;
  /// The same pattern's time with plain stores (0 where not measured): the cost model's price of the window reads
  /// of a large call that fills the windows with plain stores (CostParams::window_plain_beta).
  double window_plain_seconds = 0;
  /// The probe's small pattern with plain stores, seconds per byte of the window copied in and out
  /// (WindowProbe::small_seconds_per_byte; 0 where not measured): the cost model's price of small window reads.
  double window_small_seconds_per_byte = 0;

  int node_count() const { return static_cast<int>(nodes.size()); }
  int leader(int node) const { return nodes[static_cast<std::size_t>(node)][0]; }
  /// The rank of `node` that serves rail (slice) j of a two-level algorithm: its local rank j mod its size, so
  /// a full node uses every rank once and a smaller one serves several rails with the same ranks.
  int rail_member(int rail, int node) const;
  /// "2 nodes (ranks per node 2, 2): node 0 'a' ranks 0,1 (leader 0); node 1 'b' ranks 2,3 (leader 2)".
  std::string describe() const;
};

/// From the host ids the group's mesh knows (one node when the view has no mesh).
Topology topology_of(const GroupView& view);
/// From one host id per group rank.
Topology topology_of(const std::vector<std::string>& hosts);

/// A group's topology and the sub-views of it that this rank belongs to. A view this rank is not in has rank -1.
struct Hierarchy {
  Topology topo;
  int node = 0;                  ///< this rank's node
  int local = 0;                 ///< this rank's index on it
  GroupView node_view;           ///< this rank's node
  GroupView leaders;             ///< each node's lowest rank, in node order
  std::vector<GroupView> rails;  ///< rail j (j < max_local): rail_member(j, n) of every node n, in node order
};

/// `hosts`: one host id per group rank; empty: the mesh's. Engine::create builds it from the mesh unless the view
/// comes with one (the threads-as-ranks tests simulate nodes so: their loopback transport connects only ranks of
/// one host id).
std::shared_ptr<const Hierarchy> build_hierarchy(const GroupView& view, const std::vector<std::string>& hosts = {});
/// The view of `members` (ranks of `group`, in the order the new view ranks them), as this rank sees it.
GroupView sub_view(const GroupView& group, const std::vector<int>& members);

/// Whether the view's group spans two nodes or more (what every hierarchical algorithm requires), and has at most
/// kMaxRails ranks on a node (each rail takes steps of its own).
bool spans_nodes(const GroupView& view);
inline constexpr int kMaxRails = 256;

}  // namespace dcomm::coll
