#include "groups.hpp"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <dcomm/dcomm.hpp>
#include <memory>
#include <mutex>
#include <numeric>

#include "store_adapter.hpp"

namespace dcomm_torch {
namespace {

// The dcomm worlds this process made, in creation order, with their members as torch global ranks. Every member
// of a new torch group has made the same worlds that contain all of its members (each was a torch group of its
// own, and torch creates groups in one order everywhere), so "the first live world that contains every member"
// is the same world on every member. Subgroups keep their world's connections alive; the entry here lives as
// long as the world's own torch group.
struct World {
  std::vector<int> members;
  std::weak_ptr<dcomm::ProcessGroup> group;
};
std::mutex worlds_mu;
std::vector<World> worlds;

dcomm::Duration duration_of(std::chrono::milliseconds t) {
  return t.count() < 0 ? dcomm::kDefaultTimeout : dcomm::Duration(t.count());
}

}  // namespace

dcomm::ProcessGroupPtr join_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                  std::chrono::milliseconds timeout, std::vector<int> global_ranks,
                                  const std::string& name) {
  if (global_ranks.empty()) {
    global_ranks.resize(static_cast<std::size_t>(size));
    std::iota(global_ranks.begin(), global_ranks.end(), 0);
  }
  TORCH_CHECK(global_ranks.size() == static_cast<std::size_t>(size) && rank >= 0 && rank < size, "dcomm: torch group '",
              name, "' of size ", size, " came with ", global_ranks.size(), " ranks and group rank ", rank);
  auto rendezvous = adapt_store(store, fmt::format("torch's store of group '{}' ({} ranks)", name, size));
  dcomm::ProcessGroupPtr parent;
  std::vector<int> in_parent;
  {
    std::lock_guard<std::mutex> lock(worlds_mu);
    for (const auto& w : worlds) {
      parent = w.group.lock();
      if (!parent) continue;
      in_parent.clear();
      for (int g : global_ranks) {
        auto at = std::find(w.members.begin(), w.members.end(), g);
        if (at == w.members.end()) break;
        in_parent.push_back(static_cast<int>(at - w.members.begin()));
      }
      if (in_parent.size() == global_ranks.size()) break;
      parent.reset();
    }
  }
  if (parent) {
    auto pg = parent->new_group_of_members(in_parent, *rendezvous);
    TORCH_CHECK(pg && pg->rank() == rank, "dcomm: torch group '", name, "': the dcomm subgroup gave this process rank ",
                pg ? pg->rank() : -1, ", torch rank ", rank);
    return pg;
  }
  dcomm::InitOptions o;
  o.rank = rank;
  o.world_size = size;
  o.timeout = duration_of(timeout);
  // This group's ranks are torch's group ranks, not the launcher's: the rest of the identity (local rank, node)
  // comes from dcomm's exchange through torch's store, never from RANK / LOCAL_RANK.
  o.from_environment = false;
  o.store = rendezvous;
  auto pg = dcomm::init(o);
  std::lock_guard<std::mutex> lock(worlds_mu);
  worlds.erase(std::remove_if(worlds.begin(), worlds.end(), [](const World& w) { return w.group.expired(); }),
               worlds.end());
  worlds.push_back(World{global_ranks, pg});
  return pg;
}

}  // namespace dcomm_torch
