// split() and new_group(): both are collective over the parent group. The parent's members agree on who is in
// each new group, the new group's first member takes a fresh tag context from the world store's counter and
// publishes it, and the members build the group over the same mesh with that context. new_group_of_members()
// is new_group() for callers whose non-members do not call (torch's new_group): the caller's store names it.

#include <fmt/format.h>

#include <algorithm>
#include <dcomm/error.hpp>
#include <set>
#include <tuple>

#include "runtime/process_group_impl.hpp"
#include "transports/tags.hpp"

namespace dcomm::runtime {

namespace {

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroupImpl::make_subgroup(const std::vector<int>& world_members, Store& rendezvous,
                                                              const std::string& key, bool check_members) {
  const int me = world_->identity.rank;
  auto it = std::find(world_members.begin(), world_members.end(), me);
  if (it == world_members.end()) return nullptr;
  // The first member publishes "context:ranks", so a member given other ranks than the first one fails here
  // instead of building a group that pairs with the wrong peers. With `check_members` (members-only creation, where
  // no collective over the parent made them agree) every member also publishes its list and the first member reads
  // them all, so that it fails too instead of waiting in the new group for a rank that is not coming.
  const std::string members = join(world_members);
  auto refuse = [&](int who, const std::string& theirs) {
    return InvalidUsageError(fmt::format(
        "split/new_group {}: this rank was given the world ranks [{}], but world rank {} was given [{}] (at '{}' "
        "of {}); every member must list the same ranks",
        label(), members, who, theirs, key, rendezvous.describe()));
  };
  if (check_members) rendezvous.set(fmt::format("{}/{}", key, me), members);
  uint32_t context = 0;
  if (it == world_members.begin()) {
    int64_t next = world_->store->add("next_context", 1);
    if (next >= static_cast<int64_t>(transport::kMaxContexts)) {
      throw InvalidUsageError(fmt::format("split/new_group {}: all {} group contexts of this world are used",
                                          label(), transport::kMaxContexts - 1));
    }
    context = static_cast<uint32_t>(next);
    rendezvous.set(key, fmt::format("{}:{}", context, members));
    if (check_members) {
      std::vector<std::string> keys;
      for (auto m = world_members.begin() + 1; m != world_members.end(); ++m) {
        keys.push_back(fmt::format("{}/{}", key, *m));
      }
      const auto lists = rendezvous.multi_get(keys);
      for (std::size_t i = 0; i < lists.size(); ++i) {
        const std::string theirs(lists[i].begin(), lists[i].end());
        if (theirs != members) throw refuse(world_members[i + 1], theirs);
      }
    }
  } else {
    const std::string got = rendezvous.get_string(key);
    const auto colon = got.find(':');
    if (colon == std::string::npos || got.substr(colon + 1) != members) {
      throw refuse(world_members.front(), colon == std::string::npos ? got : got.substr(colon + 1));
    }
    context = static_cast<uint32_t>(std::stoul(got.substr(0, colon)));
  }
  coll::GroupView view;
  view.mesh = world_->mesh;
  view.rank = static_cast<int>(it - world_members.begin());
  view.size = static_cast<int>(world_members.size());
  view.world_ranks = world_members;
  view.context = context;
  return std::make_shared<ProcessGroupImpl>(world_, std::move(view),
                                            make_prefix_store(fmt::format("group/{}/", context), world_->store));
}

std::vector<int> ProcessGroupImpl::world_members_of(const std::vector<int>& ranks, const char* op) const {
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= size() || !seen.insert(r).second) {
      throw InvalidUsageError(fmt::format("{} {}: rank {} is {} (ranks must be distinct, 0..{})", op, label(), r,
                                          seen.count(r) ? "listed twice" : "outside the group", size() - 1));
    }
  }
  if (ranks.empty()) throw InvalidUsageError(fmt::format("{} {}: the rank list is empty", op, label()));
  std::vector<int> world_members;
  for (int r : ranks) world_members.push_back(view_.world_ranks[static_cast<std::size_t>(r)]);
  return world_members;
}

std::shared_ptr<ProcessGroup> ProcessGroupImpl::split(int color, int key) {
  uint64_t round = rounds_.fetch_add(1);
  // Everyone learns everyone's (color, key): one all_gather over this group.
  std::vector<int64_t> mine = {color, key};
  std::vector<int64_t> all(2 * static_cast<std::size_t>(size()));
  all_gather(Buffer(mine), Buffer(all), {});
  if (color < 0) return nullptr;
  std::vector<std::tuple<int64_t, int, int>> members;  // (key, group rank, world rank)
  for (int r = 0; r < size(); ++r) {
    if (all[2 * static_cast<std::size_t>(r)] == color) {
      members.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r, view_.world_ranks[static_cast<std::size_t>(r)]);
    }
  }
  std::sort(members.begin(), members.end());
  std::vector<int> world_members;
  for (const auto& m : members) world_members.push_back(std::get<2>(m));
  return make_subgroup(world_members, *store_, fmt::format("split/{}/{}", round, color), false);
}

std::shared_ptr<ProcessGroup> ProcessGroupImpl::new_group(const std::vector<int>& ranks) {
  uint64_t round = rounds_.fetch_add(1);
  return make_subgroup(world_members_of(ranks, "new_group"), *store_, fmt::format("new_group/{}", round), false);
}

// Only the members call it, so no round counter of this group can name the group: the caller's store does.
std::shared_ptr<ProcessGroup> ProcessGroupImpl::new_group_of_members(const std::vector<int>& ranks, Store& rendezvous) {
  return make_subgroup(world_members_of(ranks, "new_group_of_members"), rendezvous, "dcomm/subgroup", true);
}

}  // namespace dcomm::runtime
