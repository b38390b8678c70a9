#pragma once
// This node's ranks for one round: starting them, forwarding their output, reaping them, and signalling their
// process groups.

#include <memory>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "tools/run/output_pump.hpp"
#include "tools/run/rank_env.hpp"
#include "tools/run/summary.hpp"

namespace dcomm::run {

class RankGroup {
 public:
  /// Lines of each rank's stderr kept for the failure summary.
  static constexpr std::size_t kStderrTailLines = 10;

  RankGroup(const LaunchOptions& o, std::string host) : options_(o), host_(std::move(host)) {}
  /// Kills and reaps whatever is left (only on an exception out of a round; normally release() did the reaping).
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  /// Starts every local rank. If one cannot start, those already started are killed and the SystemError
  /// naming the program is rethrown.
  void start(const RoundInfo& round);

  struct Rank {
    RankExit exit;  ///< identity from the start; status once reaped
    bool running = false;
    bool reaped = false;  ///< exited ranks stay zombies (holding their group's number) until release()
    int stop_signal = 0;  ///< the signal that stopped it (SIGSTOP, SIGTSTP, a debugger's), while it is stopped
    Clock::time_point stopped_at{};
    std::unique_ptr<LineForwarder> out;
    std::unique_ptr<LineForwarder> err;
  };
  std::vector<Rank>& ranks() { return ranks_; }

  /// Collects the status of ranks that have exited (never blocks); returns their indices in the order found.
  /// They stay zombies until release().
  std::vector<std::size_t> reap();
  /// Notes ranks that were stopped or continued since the last call (never blocks); returns the indices whose
  /// stop_signal changed.
  std::vector<std::size_t> poll_stops();
  /// Reaps the exited ranks for good; after this their process groups are no longer signalled.
  void release();
  /// Sends sig to the process group of every rank started this round (exited ranks' groups too, to reach
  /// grandchildren they left behind; safe because exited ranks are not reaped before release()). Ranks still
  /// running are marked as stopped by dcomm-run when `mark_stopped`.
  void signal_all(int sig, bool mark_stopped);
  bool any_running() const;
  /// Whether any output pipe is still open.
  bool any_output_open() const;
  /// Closes every output pipe after forwarding what is in it.
  void close_output();

 private:
  const LaunchOptions& options_;
  std::string host_;
  std::vector<Rank> ranks_;
};

}  // namespace dcomm::run
