#pragma once
// The launcher's signals as a file descriptor. SIGINT, SIGTERM, SIGHUP, SIGQUIT (to forward) and SIGCHLD (a rank
// exited) are blocked and read from a signalfd, so the supervisor's one poll loop sees them beside the output pipes.
// Construct it first thing in main(), before any thread exists, so every thread inherits the blocked mask.

#include <signal.h>

#include <string>
#include <vector>

namespace dcomm::run {

class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  int fd() const { return fd_; }
  /// The signals delivered since the last call (SIGCHLD included), oldest first. Never blocks.
  std::vector<int> drain();
  /// The signals the launcher blocks; children get them unblocked and at their default action.
  const sigset_t& handled() const { return set_; }

 private:
  sigset_t set_;
  sigset_t old_;
  int fd_ = -1;
};

/// Whether a signal is one the launcher forwards to its ranks (SIGINT, SIGTERM, SIGHUP, SIGQUIT).
bool is_forwarded_signal(int sig);

/// "SIGSEGV (Segmentation fault)".
std::string describe_signal(int sig);

}  // namespace dcomm::run
