#include "collectives/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "transports/placement.hpp"

namespace dcomm::coll {

int Topology::rail_member(int rail, int node) const {
  const auto& ranks = nodes[static_cast<std::size_t>(node)];
  return ranks[static_cast<std::size_t>(rail) % ranks.size()];
}

namespace {

// "0,2,4-7": runs of consecutive ranks as ranges, so a large node stays one short line.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",", ranks[i]);
    if (j > i) out += fmt::format("{}{}", j == i + 1 ? "," : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

constexpr std::size_t kNodesDescribed = 8;

}  // namespace

std::string Topology::describe() const {
  std::string sizes;
  for (const auto& n : nodes) sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", n.size());
  std::string out = fmt::format("{} node{} (ranks per node {})", nodes.size(), nodes.size() == 1 ? "" : "s", sizes);
  for (std::size_t n = 0; n < nodes.size() && n < kNodesDescribed; ++n) {
    out += fmt::format("{} node {} '{}' ranks {} (leader {})", n == 0 ? ":" : ";", n, host_ids[n],
                       rank_list(nodes[n]), nodes[n][0]);
  }
  if (nodes.size() > kNodesDescribed) out += fmt::format("; {} more nodes", nodes.size() - kNodesDescribed);
  return out;
}

Topology topology_of(const GroupView& view) {
  std::vector<std::string> hosts;
  for (int r = 0; r < view.size; ++r) {
    const int world = view.world_ranks.empty() ? r : view.world_ranks[static_cast<std::size_t>(r)];
    hosts.push_back(view.mesh ? view.mesh->peer(world).host_id : std::string("local"));
  }
  return topology_of(hosts);
}

namespace {

// Whether some rank of the group shares its cores (from the affinities every rank published: alike everywhere).
bool group_shares_cores(const GroupView& view) {
  if (!view.mesh) return false;
  std::vector<transport::PeerInfo> peers;
  for (int r = 0; r < view.size; ++r) {
    peers.push_back(view.mesh->peer(view.world_ranks.empty() ? r : view.world_ranks[static_cast<std::size_t>(r)]));
  }
  for (int r = 0; r < view.size; ++r) {
    if (transport::shares_cores(peers, r)) return true;
  }
  return false;
}

}  // namespace

Topology topology_of(const std::vector<std::string>& hosts) {
  Topology t;
  t.node_of.assign(hosts.size(), 0);
  t.local_of.assign(hosts.size(), 0);
  std::map<std::string, int> index;
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    auto [it, fresh] = index.emplace(hosts[r], static_cast<int>(t.nodes.size()));
    if (fresh) {
      t.nodes.emplace_back();
      t.host_ids.push_back(hosts[r]);
    }
    auto& ranks = t.nodes[static_cast<std::size_t>(it->second)];
    t.node_of[r] = it->second;
    t.local_of[r] = static_cast<int>(ranks.size());
    ranks.push_back(static_cast<int>(r));
  }
  t.max_local = 0;
  t.min_local = static_cast<int>(hosts.size());
  for (const auto& n : t.nodes) {
    t.max_local = std::max(t.max_local, static_cast<int>(n.size()));
    t.min_local = std::min(t.min_local, static_cast<int>(n.size()));
  }
  return t;
}

GroupView sub_view(const GroupView& group, const std::vector<int>& members) {
  GroupView v;
  v.mesh = group.mesh;
  v.context = group.context;
  v.size = static_cast<int>(members.size());
  v.rank = -1;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r == group.rank) v.rank = static_cast<int>(i);
    v.world_ranks.push_back(group.world_ranks.empty() ? r : group.world_ranks[static_cast<std::size_t>(r)]);
  }
  return v;
}

std::shared_ptr<const Hierarchy> build_hierarchy(const GroupView& view, const std::vector<std::string>& hosts) {
  auto h = std::make_shared<Hierarchy>();
  h->topo = hosts.empty() ? topology_of(view) : topology_of(hosts);
  h->topo.shares_cores = group_shares_cores(view);  // once per group: the cost model reads it on every choice
  const Topology& t = h->topo;
  h->node = t.node_of[static_cast<std::size_t>(view.rank)];
  h->local = t.local_of[static_cast<std::size_t>(view.rank)];
  h->node_view = sub_view(view, t.nodes[static_cast<std::size_t>(h->node)]);
  std::vector<int> members;
  for (int n = 0; n < t.node_count(); ++n) members.push_back(t.leader(n));
  h->leaders = sub_view(view, members);
  // Rails only where a hierarchical algorithm may run: a node with more ranks than kMaxRails has none.
  if (t.node_count() > 1 && t.max_local <= kMaxRails) {
    for (int j = 0; j < t.max_local; ++j) {
      members.clear();
      for (int n = 0; n < t.node_count(); ++n) members.push_back(t.rail_member(j, n));
      h->rails.push_back(sub_view(view, members));
    }
  }
  return h;
}

bool spans_nodes(const GroupView& view) {
  if (view.hierarchy == nullptr) {
    if (!view.mesh || view.size < 2) return false;
    const Topology t = topology_of(view);
    return t.node_count() > 1 && t.max_local <= kMaxRails;
  }
  return view.hierarchy->topo.node_count() > 1 && view.hierarchy->topo.max_local <= kMaxRails;
}

}  // namespace dcomm::coll
