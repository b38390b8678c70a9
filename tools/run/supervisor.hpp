#pragma once
// One round of this node's ranks: start them, forward their output, watch for exits, signals and other nodes'
// failures, and stop everyone (SIGTERM, the grace period, SIGKILL) on the first failure.

#include <string>
#include <vector>

#include "tools/run/node_link.hpp"
#include "tools/run/rank_group.hpp"
#include "tools/run/rank_records.hpp"
#include "tools/run/signals.hpp"

namespace dcomm::run {

struct RoundResult {
  enum class Outcome {
    kSucceeded,    ///< every rank (of every node) exited with 0
    kFailed,       ///< a rank failed here or on another node; `failures` has the root cause first
    kInterrupted,  ///< dcomm-run received `signal` and forwarded it
    kLinkLost,     ///< the store went away (node 0's launcher exited?); `link_error` says what failed
  };
  Outcome outcome = Outcome::kSucceeded;
  std::vector<RankExit> failures;
  std::vector<RankExit> stopped;
  int signal = 0;
  std::string link_error;
  std::string flight_report;  ///< the flight recorder's report of a timeout, when a rank wrote one
  /// --keep-going: the ranks that failed while the others went on, and the shrinks the group recorded.
  std::vector<RankExit> lost;
  std::vector<std::string> shrinks;
};

class Supervisor {
 public:
  /// How often the other nodes are asked about failures.
  static constexpr Duration kLinkPollInterval = std::chrono::milliseconds(100);
  /// How long output pipes may stay open after every rank exited (a grandchild can hold them).
  static constexpr Duration kDrainTimeout = std::chrono::seconds(2);
  /// Reads of an exited rank's pipes before its stderr tail is taken.
  static constexpr int kExitDrainReads = 64;

  /// `rank_store`: an unprefixed client of the ranks' store (rank_records.hpp), or null.
  Supervisor(const LaunchOptions& o, SignalWatcher& signals, NodeLink* link, std::string host,
             std::shared_ptr<Store> rank_store = nullptr)
      : options_(o), signals_(signals), link_(link), host_(std::move(host)), rank_store_(std::move(rank_store)) {}

  /// Runs one round to its end. Throws dcomm::SystemError when the program cannot be started.
  RoundResult run_round(const RoundInfo& round);

 private:
  struct State;
  void handle_signals(State& s);
  void handle_exits(State& s);
  void poll_link(State& s);
  void begin_stop(State& s, int sig);
  void schedule_stop(State& s);
  /// --keep-going, at the end of the round: the shrinks recorded; a round where no rank finished fails as usual.
  void settle_keep_going(State& s);
  void record_failure(State& s, const RankExit& e);
  void handle_stops(State& s);
  /// At the round's first failure: the ranks stopped by a signal since before it, as root causes.
  void blame_stalled(State& s);
  /// After a failed round: a local rank that a flight recorder found holding up a timed-out call (alive, in user
  /// code, so dcomm-run stopped it) leads the summary instead of the first rank that timed out.
  void blame_hang_culprit(State& s);
  /// After a failed round: the rank recorded as the root cause (rank_records.hpp) leads the failures, so the
  /// summary agrees with what the ranks said (a survivor may exit, and be reaped, before the rank that died).
  void put_recorded_root_first(State& s);

  const LaunchOptions& options_;
  SignalWatcher& signals_;
  NodeLink* link_;
  std::string host_;
  std::shared_ptr<Store> rank_store_;
};

}  // namespace dcomm::run
