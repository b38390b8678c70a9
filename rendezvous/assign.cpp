// The rule that completes identities from every member's record (see member.hpp). Pure: no I/O, no clock.

#include <dcomm/error.hpp>

#include "rendezvous/member.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace dcomm::rdzv {
namespace {

[[noreturn]] void fail(const std::string& what) { throw InvalidUsageError("rendezvous: " + what); }

// A field is given to every member or to none; a mix means the launch is misconfigured.
bool all_declared(const std::vector<Member>& ms, int Identity::*field, const char* name) {
  auto given = [&](const Member& m) { return m.declared.*field >= 0; };
  auto first_given = std::find_if(ms.begin(), ms.end(), given);
  auto first_missing = std::find_if_not(ms.begin(), ms.end(), given);
  if (first_given == ms.end()) return false;
  if (first_missing == ms.end()) return true;
  fail(fmt::format("{} is given to {} ({} {}) but not to {}; give every process a {} or none", name,
                   first_given->describe(), name, first_given->declared.*field, first_missing->describe(), name));
}

}  // namespace

std::optional<std::string> early_conflict(const std::vector<Member>& ms) {
  std::map<int, const Member*> by_rank;
  for (const Member& m : ms) {
    if (!m.error.empty()) return fmt::format("{} cannot join: {}", m.describe(), m.error);
    const Member& first = ms.front();
    if (m.declared.world_size != first.declared.world_size) {
      return fmt::format("processes disagree on the world size: {} says {}, {} says {}", first.describe(),
                         first.declared.world_size, m.describe(), m.declared.world_size);
    }
    if (m.declared.rank < 0) continue;
    auto [it, fresh] = by_rank.emplace(m.declared.rank, &m);
    if (!fresh) {
      return fmt::format("rank {} is claimed by two processes: {} and {}", m.declared.rank, it->second->describe(),
                         m.describe());
    }
  }
  return std::nullopt;
}

std::vector<Identity> assign_identities(const std::vector<Member>& ms) {
  if (auto conflict = early_conflict(ms)) fail(*conflict);
  const int n = static_cast<int>(ms.size());
  std::vector<Identity> ids(ms.size());
  for (int j = 0; j < n; ++j) ids[j] = ms[j].declared;

  // Ranks: declared (a permutation, as early_conflict found no duplicate and each process checked its range),
  // or the join order.
  if (!all_declared(ms, &Identity::rank, "rank")) {
    for (int j = 0; j < n; ++j) ids[j].rank = j;
  }
  std::vector<int> by_rank(ms.size());
  for (int j = 0; j < n; ++j) {
    if (ids[j].rank >= n) fail(fmt::format("{} claims rank {} of a world of {}", ms[j].describe(), ids[j].rank, n));
    by_rank[ids[j].rank] = j;
  }

  // Nodes: declared node ranks, or host ids numbered in order of first appearance by rank.
  if (!all_declared(ms, &Identity::node_rank, "node rank")) {
    std::map<std::string, int> node_of_host;
    for (int j : by_rank) {
      auto [it, fresh] = node_of_host.emplace(ids[j].host_id, static_cast<int>(node_of_host.size()));
      ids[j].node_rank = it->second;
    }
  }
  std::map<int, std::vector<int>> nodes;  // node rank -> members by rank
  for (int j : by_rank) nodes[ids[j].node_rank].push_back(j);
  const int node_count = static_cast<int>(nodes.size());
  if (nodes.rbegin()->first != node_count - 1) {
    fail(fmt::format("node ranks are not dense: {} nodes, yet {} declares node rank {}", node_count,
                     ms[nodes.rbegin()->second.front()].describe(), nodes.rbegin()->first));
  }

  bool local_declared = all_declared(ms, &Identity::local_rank, "local rank");
  for (auto& [node, members] : nodes) {
    const int local_size = static_cast<int>(members.size());
    std::vector<const Member*> local_owner(members.size(), nullptr);
    for (int i = 0; i < local_size; ++i) {
      int j = members[i];
      const Member& m = ms[j];
      if (m.declared.local_world_size >= 0 && m.declared.local_world_size != local_size) {
        fail(fmt::format("node {} (host id '{}') has {} processes but {} declares local world size {}{}", node,
                         m.declared.host_id, local_size, m.describe(), m.declared.local_world_size,
                         local_size > m.declared.local_world_size ? " (more local ranks than declared)" : ""));
      }
      if (m.declared.node_count >= 0 && m.declared.node_count != node_count) {
        fail(fmt::format("the world spans {} nodes but {} declares node count {}", node_count, m.describe(),
                         m.declared.node_count));
      }
      if (!local_declared) ids[j].local_rank = i;
      int lr = ids[j].local_rank;
      if (lr >= local_size) {
        fail(fmt::format("{} declares local rank {} but node {} has only {} processes", m.describe(), lr, node,
                         local_size));
      }
      if (local_owner[lr] != nullptr) {
        fail(fmt::format("local rank {} on node {} is claimed by two processes: {} and {}", lr, node,
                         local_owner[lr]->describe(), m.describe()));
      }
      local_owner[lr] = &m;
      ids[j].local_world_size = local_size;
      ids[j].node_count = node_count;
    }
  }
  return ids;
}

}  // namespace dcomm::rdzv
