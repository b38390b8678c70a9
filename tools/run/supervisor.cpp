#include "tools/run/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <dcomm/error.hpp>

#include <fmt/format.h>

#include "common/deadline.hpp"

namespace dcomm::run {

struct Supervisor::State {
  int round = 0;
  RankGroup group;
  RoundResult result;
  bool stopping = false;
  bool killed = false;
  bool reported_success = false;
  Clock::time_point kill_at{};
  Clock::time_point term_at = Clock::time_point::max();  // a failure was seen: SIGTERM the rest at this time
  Clock::time_point next_link_poll{};
  Clock::time_point drain_until = Clock::time_point::max();
  RankRecords records;
  std::vector<int> stalled;  ///< local indices of ranks blamed as stalled (not listed again as stopped)
  State(const LaunchOptions& o, const std::string& host, std::shared_ptr<Store> store, const RoundInfo& round)
      : group(o, host), records(std::move(store), round) {}
};

void Supervisor::begin_stop(State& s, int sig) {
  s.group.signal_all(sig, true);
  if (s.stopping) return;
  s.stopping = true;
  s.kill_at = Clock::now() + options_.grace_period;
}

// A failed rank's peers usually notice within a fraction of a second and exit with an error that names it; they
// get options_.failure_window to do so (and to print that error) before the rest are stopped.
void Supervisor::schedule_stop(State& s) {
  if (s.stopping) return;
  s.term_at = std::min(s.term_at, Clock::now() + options_.failure_window);
  if (options_.failure_window <= Duration(0)) begin_stop(s, SIGTERM);
}

void Supervisor::blame_stalled(State& s) {
  auto& ranks = s.group.ranks();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankGroup::Rank& r = ranks[i];
    if (!r.running || r.stop_signal == 0) continue;
    RankExit e = r.exit;
    e.stalled = fmt::format("stopped by signal {} {} {} before the first failure and never resumed; its peers "
                            "timed out waiting for it",
                            r.stop_signal, describe_signal(r.stop_signal),
                            format_duration(std::chrono::duration_cast<Duration>(Clock::now() - r.stopped_at)));
    s.result.failures.push_back(e);
    s.stalled.push_back(static_cast<int>(i));
  }
}

void Supervisor::blame_hang_culprit(State& s) {
  auto culprit = s.records.hang_culprit();
  if (!culprit || s.result.failures.empty() || !s.result.failures.front().stalled.empty()) return;
  const auto& ranks = s.group.ranks();
  auto local = std::find_if(ranks.begin(), ranks.end(), [&](const auto& r) { return r.exit.rank == culprit->first; });
  if (local == ranks.end()) return;  // another node's rank: its launcher says so
  // Whether dcomm-run stopped it or it ended on its own after the failure, it is the cause, listed once.
  std::erase_if(s.result.stopped, [&](const RankExit& e) { return e.rank == culprit->first; });
  std::erase_if(s.result.failures, [&](const RankExit& e) { return e.rank == culprit->first; });
  RankExit e = local->exit;
  e.stalled = culprit->second;
  s.result.failures.insert(s.result.failures.begin(), e);
}

void Supervisor::put_recorded_root_first(State& s) {
  auto root = s.records.root_rank();
  if (!root || s.result.failures.empty() || !s.result.failures.front().stalled.empty()) return;
  auto it = std::find_if(s.result.failures.begin(), s.result.failures.end(),
                         [&](const RankExit& e) { return e.rank == *root; });
  if (it != s.result.failures.end()) std::rotate(s.result.failures.begin(), it, it + 1);
}

void Supervisor::handle_stops(State& s) {
  for (std::size_t i : s.group.poll_stops()) {
    const RankGroup::Rank& r = s.group.ranks()[i];
    s.records.rank_stopped(r.exit.rank, r.stop_signal);
  }
}

void Supervisor::record_failure(State& s, const RankExit& e) {
  if (s.result.outcome == RoundResult::Outcome::kSucceeded) s.result.outcome = RoundResult::Outcome::kFailed;
  const bool first = s.result.failures.empty();
  if (link_ != nullptr && first && s.result.outcome != RoundResult::Outcome::kLinkLost) {
    try {
      RankExit first = link_->report_failure(s.round, e);
      // Another node failed first: its failure is the root cause, ours follows.
      if (first.node_rank != e.node_rank || first.rank != e.rank) s.result.failures.push_back(first);
    } catch (const Error& err) {
      s.result.link_error = err.what();
    }
  }
  // A rank stopped by a signal makes its peers time out: it, not the first of them to exit, is the cause.
  if (first) blame_stalled(s);
  s.result.failures.push_back(e);
}

void Supervisor::handle_signals(State& s) {
  for (int sig : signals_.drain()) {
    if (!is_forwarded_signal(sig)) continue;  // SIGCHLD: handle_exits() reaps
    if (s.result.signal != 0) {
      // A second signal: the user wants out now.
      s.group.signal_all(SIGKILL, true);
      s.killed = true;
      continue;
    }
    s.result.signal = sig;
    if (s.result.outcome == RoundResult::Outcome::kSucceeded) s.result.outcome = RoundResult::Outcome::kInterrupted;
    if (link_ != nullptr && s.result.failures.empty()) {
      RankExit self;
      self.node_rank = options_.node_rank;
      self.host = host_;
      self.pid = ::getpid();
      self.signaled = true;
      self.code = sig;
      try {
        link_->report_failure(s.round, self);
      } catch (const Error&) {
        // The other nodes will see the store (or this node) go away instead.
      }
    }
    begin_stop(s, sig);
  }
}

void Supervisor::handle_exits(State& s) {
  for (std::size_t i : s.group.reap()) {
    RankGroup::Rank& r = s.group.ranks()[i];
    // What the rank wrote just before it exited may still be in its pipes: take it first, so the summary's tail
    // has its last words (bounded: a grandchild may keep writing).
    for (int reads = 0; reads < kExitDrainReads && (r.out->pump() || r.err->pump()); ++reads) {
    }
    r.exit.stderr_tail = r.err->tail();
    const bool stalled = std::find(s.stalled.begin(), s.stalled.end(), static_cast<int>(i)) != s.stalled.end();
    if (stalled) continue;  // already the root cause of the summary
    if (r.exit.failed()) s.records.rank_failed(r.exit);
    if (r.exit.stopped) {
      s.result.stopped.push_back(r.exit);
    } else if (r.exit.failed() && options_.keep_going) {
      // The others carry on (and shrink): keep the loss for the summary; a run where nobody finishes still fails.
      std::string line = fmt::format("dcomm-run: {}; --keep-going: the other ranks carry on\n", describe_exit(r.exit));
      std::fputs(line.c_str(), stderr);
      s.result.lost.push_back(r.exit);
    } else if (r.exit.failed()) {
      record_failure(s, r.exit);
      schedule_stop(s);
    }
  }
  if (!s.group.any_running() && s.drain_until == Clock::time_point::max()) {
    s.drain_until = Clock::now() + kDrainTimeout;
  }
}

void Supervisor::poll_link(State& s) {
  if (link_ == nullptr || Clock::now() < s.next_link_poll || !s.result.link_error.empty()) return;
  s.next_link_poll = Clock::now() + kLinkPollInterval;
  try {
    if (!s.stopping) {
      if (auto remote = link_->first_failure(s.round); remote && s.result.failures.empty()) {
        record_failure(s, *remote);
        // A membership change is no rank's failure: nothing to wait for, stop the ranks now.
        if (remote->rejoin) begin_stop(s, SIGTERM);
        schedule_stop(s);
      }
    }
  } catch (const Error& err) {
    s.result.link_error = err.what();
    if (s.result.outcome == RoundResult::Outcome::kSucceeded) s.result.outcome = RoundResult::Outcome::kLinkLost;
    begin_stop(s, SIGTERM);
  }
}

void Supervisor::settle_keep_going(State& s) {
  s.result.shrinks = s.records.shrinks();
  if (s.result.lost.empty() || !s.result.failures.empty()) return;
  bool any_finished = false;
  for (const auto& r : s.group.ranks()) any_finished = any_finished || (!r.exit.failed() && !r.exit.stopped);
  if (!any_finished) {
    // Nobody went on to the end: an ordinary failure, the first loss as its root cause.
    for (const auto& e : s.result.lost) record_failure(s, e);
    s.result.lost.clear();
  }
}

RoundResult Supervisor::run_round(const RoundInfo& round) {
  State s(options_, host_, rank_store_, round);
  s.round = round.restart_count;
  s.group.start(round);
  bool others_done = link_ == nullptr;
  while (true) {
    handle_signals(s);
    handle_stops(s);
    handle_exits(s);
    s.records.flush_pending();
    poll_link(s);
    if (!s.stopping && Clock::now() >= s.term_at) begin_stop(s, SIGTERM);
    // After the grace period, SIGKILL also reaches grandchildren that outlived their rank and hold its pipes.
    const bool anything_left = s.group.any_running() || s.group.any_output_open();
    if (s.stopping && !s.killed && anything_left && Clock::now() >= s.kill_at) {
      s.group.signal_all(SIGKILL, true);
      s.killed = true;
    }
    const bool local_done = !s.group.any_running() && (!s.group.any_output_open() || Clock::now() >= s.drain_until);
    // A failure seen (here or on another node) counts as stopping even inside the failure window: this node must
    // not report success for the round.
    const bool failing = s.stopping || !s.result.failures.empty();
    if (local_done && link_ != nullptr && !failing && s.result.link_error.empty()) {
      try {
        if (!s.reported_success) {
          link_->report_success(s.round);
          s.reported_success = true;
        }
        others_done = link_->all_succeeded(s.round);
      } catch (const Error& err) {
        s.result.link_error = err.what();
        s.result.outcome = RoundResult::Outcome::kLinkLost;
      }
    }
    if (local_done && (others_done || failing || !s.result.link_error.empty())) break;

    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    for (auto& r : s.group.ranks()) {
      for (auto* f : {r.out.get(), r.err.get()}) {
        if (f->is_open()) fds.push_back({f->fd(), POLLIN, 0});
      }
    }
    Duration wait = link_ != nullptr ? kLinkPollInterval : kDrainTimeout;
    auto until = [&](Clock::time_point t) {
      wait = std::min(wait, std::chrono::duration_cast<Duration>(t - Clock::now()) + Duration(1));
    };
    if (s.stopping && !s.killed) until(s.kill_at);
    if (!s.stopping && s.term_at != Clock::time_point::max()) until(s.term_at);
    if (!s.group.any_running()) until(s.drain_until);
    if (s.records.next_pending() != Clock::time_point::max()) until(s.records.next_pending());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max(wait, Duration(0)).count()));
    // One read per pipe per pass, so a chatty rank cannot starve the others.
    for (auto& r : s.group.ranks()) {
      r.out->pump();
      r.err->pump();
    }
  }
  if (options_.keep_going) settle_keep_going(s);
  s.group.close_output();
  if (s.stopping) s.group.signal_all(SIGKILL, false);  // grandchildren left in the ranks' groups
  s.group.release();
  if (!s.result.failures.empty()) {
    s.records.flush_pending();
    s.result.flight_report = s.records.flight_report().value_or("");
    put_recorded_root_first(s);
    blame_hang_culprit(s);
  }
  // A rank killed while it set up its shared memory leaves its segment behind; nothing of the run may stay.
  std::vector<int> pids;
  for (const auto& r : s.group.ranks()) pids.push_back(r.exit.pid);
  remove_leftover_segments(round.run_id, pids);
  return std::move(s.result);
}

}  // namespace dcomm::run
