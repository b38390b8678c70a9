#include "tools/run/elastic_link.hpp"

#include <fmt/format.h>

namespace dcomm::run {
namespace {

// How often agents beat (and look at the others' beats), unless --node-timeout asks for less.
constexpr Duration kHeartbeatInterval = std::chrono::seconds(1);

std::string key(int round, const char* what) { return fmt::format("round/{}/{}", round, what); }

}  // namespace

ElasticLink::ElasticLink(const LaunchOptions& o, std::shared_ptr<Store> store, ElasticRound round, int agent_id)
    : options_(o),
      store_(std::move(store)),
      round_(std::move(round)),
      agent_id_(agent_id),
      beats_(round_.members.size(), Beat{-1, Clock::now()}) {}

void ElasticLink::heartbeat(int round) {
  const auto now = Clock::now();
  if (now < next_beat_) return;
  next_beat_ = now + std::min<Duration>(kHeartbeatInterval, options_.node_timeout / 4);
  store_->add(fmt::format("agent/{}/beat", agent_id_), 1);
  for (std::size_t n = 0; n < round_.members.size(); ++n) {
    const ElasticMember& m = round_.members[n];
    if (m.id == agent_id_) continue;
    Beat& b = beats_[n];
    auto lost = [&](const std::string& what) {
      RankExit e;
      e.node_rank = static_cast<int>(n);
      e.host = m.host;
      e.pid = m.pid;
      e.code = kExitLauncherError;
      e.note = fmt::format("(agent {}, pid {}) {}", m.id, m.pid, what);
      report_failure(round, e);
    };
    // It received a signal while the round formed (later, it reports that itself).
    if (store_->check({fmt::format("agent/{}/gone", m.id)})) return lost("left the job (it received a signal)");
    int64_t count = store_->add(fmt::format("agent/{}/beat", m.id), 0);
    if (count != b.count) {
      b = {count, now};
      continue;
    }
    if (now - b.changed < options_.node_timeout) continue;
    return lost(fmt::format("stopped responding: no heartbeat in the store for {} (--node-timeout {}): was it "
                            "killed, or its machine lost",
                            format_duration(std::chrono::duration_cast<Duration>(now - b.changed)),
                            format_duration(options_.node_timeout)));
  }
}

void ElasticLink::look_for_waiting(int round) {
  const auto now = Clock::now();
  const int nodes = static_cast<int>(round_.members.size());
  if (now < next_look_ || nodes >= options_.nnodes) return;
  next_look_ = now + options_.monitor_interval;
  // A round whose ranks already finished somewhere is ending: it is not stopped to admit a late agent.
  if (store_->add(key(round, "succeeded"), 0) > 0) return;
  const int64_t waiting = store_->add(key(round, "waiting"), 0);
  if (waiting <= 0) return;
  RankExit change;
  change.rejoin = true;
  change.node_rank = round_.node_rank;
  change.host = round_.members[static_cast<std::size_t>(round_.node_rank)].host;
  change.note = fmt::format("{} agent(s) wait to join round {}, which has {} of at most {} nodes", waiting, round,
                            nodes, options_.nnodes);
  report_failure(round, change);
}

std::optional<RankExit> ElasticLink::first_failure(int round) {
  heartbeat(round);
  look_for_waiting(round);
  const std::string failed = key(round, "failed");
  if (!store_->check({failed})) return std::nullopt;
  return decode_exit(store_->get_string(failed));
}

RankExit ElasticLink::report_failure(int round, const RankExit& failure) {
  std::string mine = encode_exit(failure);
  Store::Bytes first = store_->compare_set(key(round, "failed"), {}, Store::Bytes(mine.begin(), mine.end()));
  return decode_exit(std::string(first.begin(), first.end()));
}

void ElasticLink::report_success(int round) { store_->add(key(round, "succeeded"), 1); }

bool ElasticLink::all_succeeded(int round) {
  return store_->add(key(round, "succeeded"), 0) >= static_cast<int64_t>(round_.members.size());
}

}  // namespace dcomm::run
