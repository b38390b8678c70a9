#include "tools/run/node_rendezvous.hpp"

#include <poll.h>
#include <unistd.h>

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/deadline.hpp"
#include "tools/run/reach.hpp"

namespace dcomm::run {
namespace {

// How often waits look at the store (and at the launcher's signals) again.
constexpr Duration kPollInterval = std::chrono::milliseconds(100);
// One connect attempt's bound, so that a signal is noticed while node 0's launcher is not up yet.
constexpr Duration kConnectSlice = std::chrono::seconds(2);
// How often launchers beat (and node 0 looks at the beats), unless --node-timeout asks for less.
constexpr Duration kHeartbeatInterval = std::chrono::seconds(1);

std::string round_key(int round, const char* what) { return fmt::format("round/{}/{}", round, what); }

}  // namespace

void pause_or_interrupt(SignalWatcher& signals) {
  pollfd p{signals.fd(), POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(kPollInterval.count()));
  for (int sig : signals.drain()) {
    if (is_forwarded_signal(sig)) throw Interrupted{sig};
  }
}

std::shared_ptr<Store> connect_store(const std::string& addr, int port, Duration timeout, SignalWatcher& signals,
                                     TcpStoreOptions opts, const std::string& hint) {
  Deadline deadline = Deadline::after(timeout);
  while (true) {
    opts.timeout = std::min(kConnectSlice, std::max(deadline.remaining(), Duration(1)));
    try {
      auto store = connect_tcp_store(addr, static_cast<uint16_t>(port), opts);
      store->set_timeout(timeout);
      return make_prefix_store("dcomm-run/", store);
    } catch (const TimeoutError&) {
      // The attempts are sliced (kConnectSlice) for the signals' sake; their own messages describe one slice, so
      // the user gets one sentence about the whole wait and the reason it fails now.
      if (deadline.expired()) {
        throw LaunchError(fmt::format("no store at {}:{} after {} (--rdzv-timeout {}): {}; {}", addr, port,
                                      format_duration(deadline.elapsed()), format_duration(timeout),
                                      unreachable_reason(addr, port), hint));
      }
    }
    pause_or_interrupt(signals);
  }
}

NodeRendezvous::NodeRendezvous(const LaunchOptions& o, std::shared_ptr<Store> store, SignalWatcher& signals,
                               std::string host)
    : options_(o), store_(std::move(store)), signals_(signals), host_(std::move(host)) {}

std::string NodeRendezvous::join(const std::string& proposed_run_id) {
  const int k = options_.node_rank;
  const std::string me = fmt::format("{} pid {}", host_, ::getpid());
  Store::Bytes mine(me.begin(), me.end());
  Store::Bytes owner = store_->compare_set(fmt::format("node/{}/claim", k), {}, mine);
  if (owner != mine) {
    throw LaunchError(fmt::format("node rank {} is already taken by the dcomm-run on {}; give every node a "
                                  "different --node-rank in [0, {})",
                                  k, std::string(owner.begin(), owner.end()), options_.nnodes));
  }
  if (k == 0) store_->set("run_id", proposed_run_id);
  nlohmann::json info = {{"host", host_}, {"nproc", options_.nproc_per_node}, {"max_restarts", options_.max_restarts}};
  store_->set(fmt::format("node/{}/info", k), info.dump());
  // Every other node reads node 0's settings (and the run id, set before them) before it counts itself in: once
  // all have joined, node 0 may find a disagreement and exit, taking the store with it.
  wait_for_key("node/0/info", options_.rdzv_timeout);
  std::string run_id = store_->get_string("run_id");
  nlohmann::json node0 = nlohmann::json::parse(store_->get_string("node/0/info"));
  store_->add("joined", 1);
  if (k != 0) check_agreement(k, info, node0);
  wait_for_all("joined", options_.rdzv_timeout, "rendezvous");
  hosts_.assign(static_cast<std::size_t>(options_.nnodes), "unknown");
  hosts_[0] = node0["host"].get<std::string>();
  if (k == 0) {
    for (int n = 1; n < options_.nnodes; ++n) {
      nlohmann::json other = nlohmann::json::parse(store_->get_string(fmt::format("node/{}/info", n)));
      check_agreement(n, other, node0);
      hosts_[static_cast<std::size_t>(n)] = other["host"].get<std::string>();
    }
  }
  return run_id;
}

void NodeRendezvous::wait_for_key(const std::string& key, Duration bound) {
  Deadline deadline = Deadline::after(bound);
  while (!store_->check({key})) {
    if (deadline.expired()) {
      throw LaunchError(fmt::format("rendezvous timed out after {}: node 0's dcomm-run never registered in the "
                                    "store at {}:{}; is it running with --nnodes {}?",
                                    format_duration(deadline.elapsed()), options_.master_addr, options_.master_port,
                                    options_.nnodes));
    }
    pause_or_interrupt(signals_);
  }
}

void NodeRendezvous::wait_for_all(const std::string& key, Duration bound, const std::string& what) {
  Deadline deadline = Deadline::after(bound);
  while (true) {
    int64_t count = store_->add(key, 0);
    if (count >= options_.nnodes) return;
    if (deadline.expired()) {
      std::string missing;
      for (int n = 0; n < options_.nnodes; ++n) {
        if (store_->check({fmt::format("node/{}/info", n)})) continue;
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", n);
      }
      throw LaunchError(fmt::format("{} timed out after {}: {} of {} nodes arrived{}; start dcomm-run on every node "
                                    "with --nnodes {} and --master-addr {} --master-port {}",
                                    what, format_duration(deadline.elapsed()), count, options_.nnodes,
                                    missing.empty() ? "" : " (missing node ranks: " + missing + ")", options_.nnodes,
                                    options_.master_addr, options_.master_port));
    }
    pause_or_interrupt(signals_);
  }
}

void NodeRendezvous::check_agreement(int node, const nlohmann::json& info, const nlohmann::json& node0) {
  for (const char* field : {"nproc", "max_restarts"}) {
    if (info[field] == node0[field]) continue;
    const char* option = std::string(field) == "nproc" ? "--nproc-per-node" : "--max-restarts";
    throw LaunchError(fmt::format("nodes disagree: node {} (host {}) runs {} {} but node 0 (host {}) runs {} {}; "
                                  "every node must be started with the same {}",
                                  node, info["host"].get<std::string>(), option, info[field].dump(),
                                  node0["host"].get<std::string>(), option, node0[field].dump(), option));
  }
}

void NodeRendezvous::heartbeat(int round) {
  const auto now = Clock::now();
  if (now < next_beat_) return;
  next_beat_ = now + std::min<Duration>(kHeartbeatInterval, options_.node_timeout / 4);
  if (options_.node_rank != 0) {
    store_->add(fmt::format("node/{}/beat", options_.node_rank), 1);
    return;
  }
  if (round != beat_round_) {  // a new round: between rounds nobody beats, so every clock starts afresh
    beat_round_ = round;
    beats_.assign(static_cast<std::size_t>(options_.nnodes), Beat{-1, now});
  }
  for (int n = 1; n < options_.nnodes; ++n) {
    Beat& b = beats_[static_cast<std::size_t>(n)];
    int64_t count = store_->add(fmt::format("node/{}/beat", n), 0);
    if (count != b.count) {
      b = {count, now};
      continue;
    }
    if (now - b.changed < options_.node_timeout) continue;
    RankExit lost;
    lost.node_rank = n;
    lost.host = hosts_[static_cast<std::size_t>(n)];
    lost.code = kExitLauncherError;
    lost.note = fmt::format("stopped responding: no heartbeat in the store for {} (--node-timeout {}); was it "
                            "killed, or its machine lost?",
                            format_duration(std::chrono::duration_cast<Duration>(now - b.changed)),
                            format_duration(options_.node_timeout));
    report_failure(round, lost);
    return;
  }
}

std::optional<RankExit> NodeRendezvous::first_failure(int round) {
  heartbeat(round);
  const std::string key = round_key(round, "failed");
  if (!store_->check({key})) return std::nullopt;
  return decode_exit(store_->get_string(key));
}

RankExit NodeRendezvous::report_failure(int round, const RankExit& failure) {
  std::string mine = encode_exit(failure);
  Store::Bytes first = store_->compare_set(round_key(round, "failed"), {}, Store::Bytes(mine.begin(), mine.end()));
  return decode_exit(std::string(first.begin(), first.end()));
}

void NodeRendezvous::report_success(int round) { store_->add(round_key(round, "succeeded"), 1); }

bool NodeRendezvous::all_succeeded(int round) {
  return store_->add(round_key(round, "succeeded"), 0) >= options_.nnodes;
}

void NodeRendezvous::restart_barrier(int round) {
  store_->add(round_key(round, "stopped"), 1);
  wait_for_all(round_key(round, "stopped"), options_.rdzv_timeout, fmt::format("restart {}", round + 1));
}

void NodeRendezvous::finish(Duration bound) {
  store_->add("done", 1);
  if (options_.node_rank != 0) return;
  try {
    wait_for_all("done", bound, "waiting for the other nodes' launchers to finish");
  } catch (const LaunchError&) {
    // They will see the store close instead; the outcome on this node stands.
  }
}

}  // namespace dcomm::run
