// ProcessGroup::shrink(): after a failure, the survivors agree on who failed (rendezvous/shrink_agreement.hpp)
// and build a new world of themselves: a new store prefix, a new failure record, a new mesh (new transports, new
// shared-memory segments, new UCX endpoints) and a new world group. Nothing of the old group can reach the new
// one: its messages travel on transports the new mesh does not own, and its keys live under another prefix.
//
// Who is certainly dead (to decide without waiting out the join window): a peer on this host whose process has
// exited, the rank dcomm-run recorded as dead (failure/dead/<launch rank>, or the root cause), or the root cause
// of this world's failure record. Anyone else who does not join within the window is left out and told so.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <dcomm/error.hpp>
#include <map>
#include <numeric>
#include <thread>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/process.hpp"
#include "rendezvous/failure_record.hpp"
#include "rendezvous/shrink_agreement.hpp"
#include "runtime/process_group_impl.hpp"
#include "transports/peer_table.hpp"

namespace dcomm {

ShrinkResult ProcessGroup::shrink(const ShrinkOptions&) {
  throw InvalidUsageError("shrink: this process group does not support shrinking (only dcomm's own groups do)");
}

}  // namespace dcomm

namespace dcomm::runtime {
namespace {

/// DCOMM_SHRINK_FAULT=joined|decided|built: this process SIGKILLs itself at that point of the shrink (after it
/// announced itself; after the members were agreed; after it built the new group, before it is ready). For the
/// tests of a failure during the shrink itself (tests/failure/shrink_matrix.py), which must hit each phase for sure.
void fault_point(const char* phase) {
  static const std::string fault = env::get("DCOMM_SHRINK_FAULT").value_or("");
  if (fault == phase) {
    DCOMM_WARN("DCOMM_SHRINK_FAULT={}: killing this process", phase);
    ::raise(SIGKILL);
  }
}

constexpr auto kDefaultJoinWindow = std::chrono::seconds(30);
constexpr auto kDeadCheckInterval = std::chrono::milliseconds(50);

/// Certain knowledge of deaths in `world`, by world rank; remembers what it found, asks the store at most every
/// kDeadCheckInterval.
class DeathOracle {
 public:
  explicit DeathOracle(const World& world)
      : world_(world), dead_(static_cast<std::size_t>(world.identity.world_size)) {}

  bool operator()(int r) {
    if (dead_[static_cast<std::size_t>(r)]) return true;
    if (r == world_.identity.rank) return false;
    const transport::PeerInfo& info = world_.mesh->peer(r);
    const transport::PeerInfo& me = world_.mesh->peer(world_.identity.rank);
    if (info.host_id == me.host_id && info.pid != me.pid && local_process_state(info.pid) == ProcessState::kExited) {
      return dead_[static_cast<std::size_t>(r)] = true;
    }
    if (Clock::now() >= next_store_check_) {
      next_store_check_ = Clock::now() + kDeadCheckInterval;
      refresh_from_store();
    }
    return dead_[static_cast<std::size_t>(r)];
  }

 private:
  void refresh_from_store() noexcept {
    if (world_.failure_store) {
      if (auto root = rdzv::read_failure(*world_.failure_store);
          root && !root->timeout && root->rank >= 0 && root->rank < world_.identity.world_size) {
        dead_[static_cast<std::size_t>(root->rank)] = true;
      }
    }
    if (!world_.launch_failures) return;
    try {
      for (int r = 0; r < world_.identity.world_size; ++r) {
        int launch = world_.launch_ranks[static_cast<std::size_t>(r)];
        if (!dead_[static_cast<std::size_t>(r)] &&
            world_.launch_failures->check({fmt::format("failure/dead/{}", launch)})) {
          dead_[static_cast<std::size_t>(r)] = true;
        }
      }
    } catch (const std::exception&) {
      // The store cannot be reached: no certain knowledge; the join window decides.
    }
  }

  const World& world_;
  std::vector<bool> dead_;
  Clock::time_point next_store_check_{};
};

/// This process's identity among `members` (old world ranks, in new-rank order): renumbered, local ranks and nodes
/// counted again over the survivors.
Identity shrunk_identity(const World& old, const std::vector<int>& members) {
  Identity id = old.identity;
  id.world_size = static_cast<int>(members.size());
  std::map<std::string, int> nodes;  // host id -> node rank, in order of first appearance
  std::map<std::string, int> locals;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const std::string& host = old.mesh->peer(members[i]).host_id;
    nodes.emplace(host, static_cast<int>(nodes.size()));
    int local = locals[host]++;
    if (members[i] == old.identity.rank) {
      id.rank = static_cast<int>(i);
      id.local_rank = local;
      id.node_rank = nodes[host];
    }
  }
  id.local_world_size = locals[old.mesh->peer(old.identity.rank).host_id];
  id.node_count = static_cast<int>(nodes.size());
  return id;
}

/// While the new mesh is built, turns a member's death (or another member's abort of the round) into a failure
/// record of the new world, which mesh setup's waits watch: setup then fails at once instead of at its timeout.
class SetupWatch {
 public:
  SetupWatch(DeathOracle& dead, std::shared_ptr<Store> agreement, int round, std::vector<int> members, int self_new,
             std::shared_ptr<Store> failures)
      : thread_([=, &dead](std::stop_token stop) {
          const std::string outcome = fmt::format("r{}/outcome", round);
          while (!stop.stop_requested()) {
            for (std::size_t i = 0; i < members.size(); ++i) {
              if (static_cast<int>(i) == self_new || !dead(members[i])) continue;
              publish(*failures, static_cast<int>(i), "died during the shrink");
              return;
            }
            try {
              if (agreement->check({outcome})) {
                publish(*failures, self_new == 0 ? 1 : 0, "(another member) aborted this shrink round");
                return;
              }
            } catch (const std::exception&) {
            }
            std::this_thread::sleep_for(kDeadCheckInterval);
          }
        }) {}

 private:
  static void publish(Store& failures, int rank, const char* what) {
    rdzv::FailureRecord rec;
    rec.rank = rank;
    rec.what = what;
    rec.reporter = "shrink";
    rdzv::publish_failure(failures, rec);
  }
  std::jthread thread_;
};

}  // namespace

ShrinkResult ProcessGroupImpl::shrink(const ShrinkOptions& opts) {
  const std::string what = fmt::format("shrink {}", label());
  if (view_.context != 0) {
    throw InvalidUsageError(
        fmt::format("{}: only a world group shrinks (this is a subgroup); shrink the group init() "
                    "or the last shrink() returned, then rebuild subgroups from the new group",
                    what));
  }
  if (world_->shrunk.exchange(true)) {
    throw InvalidUsageError(
        fmt::format("{}: this group was shrunk already; use the group that shrink() returned", what));
  }
  // The old group's work fails from here on: it is being replaced.
  auto cause = std::make_exception_ptr(AbortedError(fmt::format(
      "{}: the group was shrunk after a failure (shrink() was called); use the group shrink() returned", label())));
  world_->mesh->poison(cause);
  executor_.fail_pending(cause);

  const Duration timeout = opts.timeout == kDefaultTimeout ? world_->timeout : opts.timeout;
  const Duration window =
      std::min(opts.join_window == kDefaultTimeout ? Duration(kDefaultJoinWindow) : opts.join_window, timeout);
  DeathOracle dead(*world_);
  auto agreement_store = make_prefix_store("shrink/", world_->store);
  rdzv::ShrinkAgreement a;
  a.store = agreement_store.get();
  a.self = view_.rank;
  a.size = view_.size;
  a.known_dead = [&dead](int r) { return dead(r); };
  a.deadline = Deadline::after(timeout);
  a.join_deadline = Deadline::after(window);
  a.what = what;
  a.on_joined = [] { fault_point("joined"); };

  std::vector<int> candidates(static_cast<std::size_t>(view_.size));
  std::iota(candidates.begin(), candidates.end(), 0);
  for (int round = 0;; ++round) {
    // Each round has its window: a member still failing out of the last round's setup must not be left out of
    // this one for the time that took.
    if (round > 0) a.join_deadline = Deadline::after(std::min(window, std::max(Duration(1), a.deadline.remaining())));
    std::vector<int> members = rdzv::agree_members(a, round, candidates);
    fault_point("decided");
    candidates = members;
    auto world = std::make_shared<World>();
    world->identity = shrunk_identity(*world_, members);
    const std::string prefix = fmt::format("shrink/r{}/", round);
    world->store = make_prefix_store(prefix + "w/", world_->store);
    world->failure_store = make_prefix_store(prefix, world_->failure_store ? world_->failure_store : world_->store);
    world->timeout = world_->timeout;
    world->transport = world_->transport;
    world->launch_failures = world_->launch_failures;
    for (int m : members) world->launch_ranks.push_back(world_->launch_ranks[static_cast<std::size_t>(m)]);
    world->parent = world_;
    std::shared_ptr<ProcessGroupImpl> group;
    std::string failure;
    try {
      SetupWatch watch(dead, agreement_store, round, members, world->identity.rank, world->failure_store);
      transport::MeshOptions mo;
      mo.timeout = std::max(Duration(1), a.deadline.remaining());
      mo.forced_transport = world->transport;
      mo.failure_store = world->failure_store;
      const Identity& id = world->identity;
      world->mesh = transport::Mesh::create(
          make_prefix_store("mesh/", world->store),
          transport::local_peer_info(id.rank, id.local_rank, id.node_rank, id.host_id), id.world_size, mo);
      world->responder =
          std::make_unique<HangResponder>(world->failure_store, world->recorders, id.rank, id.world_size);
      coll::GroupView v;
      v.mesh = world->mesh;
      v.rank = id.rank;
      v.size = id.world_size;
      v.world_ranks.resize(static_cast<std::size_t>(id.world_size));
      std::iota(v.world_ranks.begin(), v.world_ranks.end(), 0);
      v.context = 0;
      group = std::make_shared<ProcessGroupImpl>(world, std::move(v), make_prefix_store("group/0/", world->store));
    } catch (const Error& e) {
      failure = e.what();
      DCOMM_INFO("{}: round {} failed to build the new group: {}", what, round, failure);
    }
    if (group) fault_point("built");
    if (!rdzv::agree_outcome(a, round, members, group != nullptr)) {
      if (a.deadline.expired()) {
        throw TimeoutError(fmt::format("{}: no round committed within {} ({} rounds; last: {})", what,
                                       format_duration(timeout), round + 1, failure.empty() ? "aborted" : failure));
      }
      continue;  // a member failed during the shrink: once more with the members of this round
    }
    // Committed: the old transports go (a peer still in the old group sees them close and fails fast).
    world_->responder.reset();
    world_->mesh->close();
    ShrinkResult result;
    result.group = group;
    result.survivors = members;
    for (int r = 0; r < view_.size; ++r) {
      if (!std::binary_search(members.begin(), members.end(), r)) result.failed.push_back(r);
    }
    result.rounds = round + 1;
    if (group->rank() == 0 && world_->launch_failures) {
      // For dcomm-run's summary (tools/run/rank_records.hpp), in the ranks it launched.
      std::vector<int> lost;
      for (int r : result.failed) lost.push_back(world_->launch_ranks[static_cast<std::size_t>(r)]);
      try {
        int64_t n = world_->launch_failures->add("shrink/count", 1);
        world_->launch_failures->set(fmt::format("shrink/{}", n),
                                     fmt::format("the group shrank from {} to {} ranks in {} (lost launch rank(s) {}; "
                                                 "{} agreement round(s))",
                                                 view_.size, members.size(), format_duration(a.deadline.elapsed()),
                                                 fmt::join(lost, ","), round + 1));
      } catch (const std::exception&) {
      }
    }
    DCOMM_INFO("{}: now rank {}/{}; failed: [{}]", what, group->rank(), group->size(), fmt::join(result.failed, ","));
    return result;
  }
}

}  // namespace dcomm::runtime
