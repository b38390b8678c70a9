#pragma once
// The launchers of several nodes meeting in the store (node 0's launcher hosts it). Every key lives under
// "dcomm-run/":
//   run_id                    node 0's run id, which every node exports as DCOMM_RUN_ID
//   node/<k>/claim            compare-set by node k's launcher, so two launchers cannot both be node k
//   node/<k>/info             {"host", "nproc", "max_restarts"} of node k, checked against node 0's
//   joined                    counter: launchers that have joined
//   round/<r>/failed          the round's first failure (compare-set, so the first one wins), as JSON
//   round/<r>/succeeded       counter: nodes whose ranks all exited 0 in round r
//   round/<r>/stopped         counter: nodes that stopped their ranks after round r failed (restart barrier)
//   node/<k>/beat             counter: node k's heartbeat (k > 0), which node 0's launcher watches during rounds
//   done                      counter: launchers that have finished (node 0 keeps the store up until all have)

#include <memory>
#include <string>
#include <vector>

#include <dcomm/store.hpp>
#include <nlohmann/json.hpp>

#include "common/deadline.hpp"
#include "tools/run/node_link.hpp"
#include "tools/run/options.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

/// Thrown out of a wait when dcomm-run receives a signal it would forward; main exits 128 + signal.
struct Interrupted {
  int signal;
};

/// A launch-level failure (rendezvous timeout, nodes that disagree, a lost store): dcomm-run exits 3.
class LaunchError : public std::runtime_error {
 public:
  explicit LaunchError(const std::string& message) : std::runtime_error(message) {}
};

/// Sleeps up to a short poll interval (100 ms); throws Interrupted when a signal to forward arrives meanwhile.
void pause_or_interrupt(SignalWatcher& signals);

/// Connects to the store at addr:port with `opts` (secret, job), retrying until `timeout` but giving up at once on
/// a forwarded signal. `hint`: what to check when no store answers.
std::shared_ptr<Store> connect_store(const std::string& addr, int port, Duration timeout, SignalWatcher& signals,
                                     TcpStoreOptions opts,
                                     const std::string& hint = "is node 0's dcomm-run running, with the same "
                                                               "--master-addr/--master-port?");

class NodeRendezvous final : public NodeLink {
 public:
  NodeRendezvous(const LaunchOptions& o, std::shared_ptr<Store> store, SignalWatcher& signals, std::string host);

  /// Joins: claims this node rank, waits (up to --rdzv-timeout) for every node, checks that all nodes agree,
  /// and returns the run id. Throws LaunchError naming how many nodes joined and which are missing.
  std::string join(const std::string& proposed_run_id);
  /// After round r failed and a restart remains: waits until every node has stopped its ranks.
  void restart_barrier(int round);
  /// Marks this launcher finished; node 0 then waits (bounded) until every launcher has, so none of them sees
  /// the store vanish before it has read the outcome.
  void finish(Duration bound);

  std::optional<RankExit> first_failure(int round) override;
  RankExit report_failure(int round, const RankExit& failure) override;
  void report_success(int round) override;
  bool all_succeeded(int round) override;

 private:
  /// Waits until counter `key` reaches the node count; throws LaunchError after `bound` with `what` and the count.
  void wait_for_all(const std::string& key, Duration bound, const std::string& what);
  /// Waits (up to `bound`) until key exists.
  void wait_for_key(const std::string& key, Duration bound);
  /// Throws LaunchError when node `node`'s settings differ from node 0's.
  static void check_agreement(int node, const nlohmann::json& info, const nlohmann::json& node0);
  /// Sends this node's heartbeat (nodes > 0) or checks the others' (node 0), at most once per interval.
  /// On node 0, reports a node whose heartbeat stopped for --node-timeout as the round's failure.
  void heartbeat(int round);

  struct Beat {
    int64_t count = -1;
    Clock::time_point changed;
  };

  const LaunchOptions& options_;
  std::shared_ptr<Store> store_;
  SignalWatcher& signals_;
  std::string host_;
  std::vector<std::string> hosts_;  ///< every node's host, from the rendezvous
  std::vector<Beat> beats_;
  int beat_round_ = -1;
  Clock::time_point next_beat_{};
};

}  // namespace dcomm::run
