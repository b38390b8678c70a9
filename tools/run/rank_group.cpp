#include "tools/run/rank_group.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include "tools/run/rank_exec.hpp"
#include "tools/run/rank_logs.hpp"
#include "tools/run/status_line.hpp"
#include "tools/run/spawn.hpp"

namespace dcomm::run {

void RankGroup::start(const RoundInfo& round) {
  ranks_.clear();
  ranks_.reserve(static_cast<std::size_t>(options_.nproc_per_node));
  const std::vector<std::string> base = current_environment();
  std::string why;
  if (resolve_program(options_.command.front(), &why).empty()) {
    const int err = why == "not an executable file" ? EACCES : ENOENT;
    throw SystemError(fmt::format("cannot start '{}' ({})", options_.command.front(), why), err);
  }
  const std::vector<std::string> argv = exec_rank_argv(options_.command);
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    Rank r;
    r.exit.rank = global_rank(options_, local);
    r.exit.local_rank = local;
    r.exit.node_rank = options_.node_rank;
    r.exit.host = host_;
    // If this rank cannot start (or its log files cannot be made), those already started are killed.
    auto abandon = [&] {
      signal_all(SIGKILL, false);
      for (auto& started : ranks_) {
        while (::waitpid(started.exit.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        started.running = false;
        started.reaped = true;
      }
      close_output();
    };
    SpawnedProcess p;
    try {
      p = spawn_process(argv, merge_environment(base, rank_variables(options_, round, local)));
    } catch (...) {
      abandon();
      throw;
    }
    r.exit.pid = p.pid;
    r.running = true;
    std::string prefix = options_.prefix_output ? fmt::format("[rank {}]: ", r.exit.rank) : std::string();
    r.out = std::make_unique<LineForwarder>(p.stdout_fd, STDOUT_FILENO, prefix, 0);
    r.err = std::make_unique<LineForwarder>(p.stderr_fd, STDERR_FILENO, prefix, kStderrTailLines);
    if (StatusLine::enabled()) r.err->show_status_lines();
    ranks_.push_back(std::move(r));
    try {
      attach_rank_logs(options_, round, local, *ranks_.back().out, *ranks_.back().err);
    } catch (...) {
      abandon();
      throw;
    }
  }
}

std::vector<std::size_t> RankGroup::reap() {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.running) continue;
    // WNOWAIT leaves the rank a zombie until release(): a zombie keeps its pid, so its process group's number
    // cannot be reused by an unrelated process while signal_all() may still send to it.
    siginfo_t info{};
    int rc = ::waitid(P_PID, static_cast<id_t>(r.exit.pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if ((rc == 0 && info.si_pid == 0) || (rc < 0 && errno == EINTR)) continue;
    r.running = false;
    if (rc < 0) {  // cannot happen for our own child; record it as a failure rather than loop forever
      r.exit.code = kExitLauncherError;
      r.reaped = true;
    } else if (info.si_code == CLD_EXITED) {
      r.exit.code = info.si_status;
    } else {
      r.exit.signaled = true;
      r.exit.code = info.si_status;
    }
    found.push_back(i);
  }
  return found;
}

std::vector<std::size_t> RankGroup::poll_stops() {
  std::vector<std::size_t> changed;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.running) continue;
    // Without WNOWAIT: each stop and each continuation is reported once. WEXITED is not asked for, so an exit
    // stays for reap().
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(r.exit.pid), &info, WSTOPPED | WCONTINUED | WNOHANG) != 0) continue;
    if (info.si_pid == 0) continue;
    if (info.si_code == CLD_STOPPED || info.si_code == CLD_TRAPPED) {
      r.stop_signal = info.si_status;
      r.stopped_at = Clock::now();
    } else if (info.si_code == CLD_CONTINUED) {
      r.stop_signal = 0;
    } else {
      continue;
    }
    changed.push_back(i);
  }
  return changed;
}

void RankGroup::release() {
  for (auto& r : ranks_) {
    if (r.running || r.reaped) continue;
    while (::waitpid(r.exit.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    r.reaped = true;
  }
}

RankGroup::~RankGroup() {
  // Normally release() ran already; this covers an exception out of the round.
  signal_all(SIGKILL, false);
  for (auto& r : ranks_) {
    if (r.reaped) continue;
    while (::waitpid(r.exit.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    r.reaped = true;
  }
}

void RankGroup::signal_all(int sig, bool mark_stopped) {
  for (auto& r : ranks_) {
    if (mark_stopped && r.running) r.exit.stopped = true;
    if (!r.reaped) signal_process_group(r.exit.pid, sig);
  }
}

bool RankGroup::any_running() const {
  for (const auto& r : ranks_) {
    if (r.running) return true;
  }
  return false;
}

bool RankGroup::any_output_open() const {
  for (const auto& r : ranks_) {
    if (r.out->is_open() || r.err->is_open()) return true;
  }
  return false;
}

void RankGroup::close_output() {
  for (auto& r : ranks_) {
    r.out->close();
    r.err->close();
  }
  StatusLine::show(STDERR_FILENO, "");  // a bar its rank left drawn must not stay on the terminal
}

}  // namespace dcomm::run
