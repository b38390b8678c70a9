#pragma once
// How a rank ended, the root-cause summary printed when a run fails, and the launcher's exit code.

#include <sys/types.h>

#include <string>
#include <vector>

namespace dcomm::run {

/// dcomm-run's exit codes (docs/launcher.md lists them).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitRankFailed = 1;     ///< the first failed rank exited with a non-zero code
inline constexpr int kExitUsage = 2;          ///< bad command line, or the store's port is taken
inline constexpr int kExitLauncherError = 3;  ///< rendezvous timed out, the store was lost, nodes disagree
inline constexpr int kExitCannotStart = 127;  ///< the program could not be started (not found, not executable)
inline constexpr int kExitSignalBase = 128;   ///< + N: the first failed rank died of signal N, or dcomm-run got N

/// How a rank ended. rank -1 stands for a node's launcher itself: it received signal `code`, or (with a `note`)
/// it stopped responding.
struct RankExit {
  int rank = -1;
  int local_rank = -1;
  int node_rank = -1;
  std::string host;
  pid_t pid = -1;
  bool signaled = false;  ///< killed by signal `code` rather than exiting with code `code`
  int code = 0;
  bool stopped = false;   ///< dcomm-run stopped it (after another rank failed, or forwarding a signal)
  std::vector<std::string> stderr_tail;
  std::string note;  ///< for rank -1 without a signal: what happened to that launcher
  /// Set when the rank was stopped by a signal before the round's first failure and never resumed: it is the
  /// root cause of its peers' timeouts ("stopped by signal 19 (SIGSTOP) 10.2 s before the first failure ...").
  std::string stalled;
  /// Elastic: not a failure but a membership change (an agent waits to join and there is room): every node stops
  /// its ranks and rendezvouses again, without using a restart. `note` says who waits.
  bool rejoin = false;

  bool failed() const { return signaled || code != 0; }
};

/// "exit code 3" or "signal 11 SIGSEGV (Segmentation fault)".
std::string describe_status(const RankExit& e);
/// "rank 5 (local rank 1, node 1, host n1, pid 4242): exit code 3".
std::string describe_exit(const RankExit& e);
/// "rank 1 failed (exit code 3)", for the restart line.
std::string describe_failure_briefly(const RankExit& e);
/// The launcher's exit code when `first` is the root cause: 1, 128 + signal, or 3 for a lost launcher.
int exit_code_for(const RankExit& first);

/// The summary written to stderr, one "dcomm-run: " line each: the failures, root cause first, each with the
/// last lines of its stderr, then which ranks dcomm-run stopped.
/// `flight_report`, when not empty, is the flight recorder's account of where every rank was (one line).
std::string format_failure_summary(const std::vector<RankExit>& failures, const std::vector<RankExit>& stopped,
                                   int world_size, const std::string& flight_report = {});

/// --keep-going's summary of a run that went on: the ranks lost, and the shrinks the group recorded.
std::string format_keep_going_summary(const std::vector<RankExit>& lost, const std::vector<std::string>& shrinks,
                                      int world_size);

/// A RankExit as one line of JSON, for other nodes' launchers (through the store), and back.
std::string encode_exit(const RankExit& e);
RankExit decode_exit(const std::string& text);

}  // namespace dcomm::run
