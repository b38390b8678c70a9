#pragma once
// Deadlines and the wait loop's backoff. Every wait in dcomm is bounded by a Deadline, and every poll loop
// spins briefly, then yields, then sleeps with growing pauses, so that 4 ranks on 2 cores stay usable.

#include <chrono>
#include <string>

#include <dcomm/types.hpp>

namespace dcomm {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  /// A deadline `timeout` from now; kNoTimeout never expires.
  static Deadline after(Duration timeout);
  static Deadline never() { return Deadline(Clock::now(), Clock::time_point::max(), kNoTimeout); }
  /// A deadline `timeout` from its first wait: from the first arm() or the first question asked of it (expired,
  /// elapsed, remaining, at, start). A collective's, so that a call that never waits (a broadcast's root, a
  /// reader whose data is there) reads no clock: the steady clock costs ~21 ns on this project's VM, 15% of a
  /// small rooted call. The time before the first wait is the call's own work, never a peer's: the timeout still
  /// bounds every wait for a peer. Lazy state is not thread-safe: for a deadline used by one thread (a copy arms
  /// itself).
  static Deadline from_first_wait(Duration timeout) {
    Deadline d(Clock::time_point{}, Clock::time_point{}, timeout);
    d.lazy_ = true;
    return d;
  }

  /// Starts a deadline made by from_first_wait() now, if nothing started it yet; a waiter calls it when it
  /// begins to wait. Any other deadline is unchanged.
  void arm() const {
    if (lazy_) start_now();
  }
  bool expired() const {
    arm();
    return at_ != Clock::time_point::max() && Clock::now() >= at_;
  }
  Duration timeout() const { return timeout_; }
  Duration elapsed() const;
  Duration remaining() const;
  Clock::time_point at() const {
    arm();
    return at_;
  }
  /// Whether it has started: a from_first_wait() deadline once something waited on it (or asked it a question),
  /// any other always. Asks nothing of it.
  bool started() const { return !lazy_; }
  /// When it started.
  Clock::time_point start() const {
    arm();
    return start_;
  }

 private:
  Deadline(Clock::time_point start, Clock::time_point at, Duration timeout)
      : at_(at), timeout_(timeout), start_(start) {}
  void start_now() const;
  mutable Clock::time_point at_;
  Duration timeout_;
  mutable Clock::time_point start_;
  mutable bool lazy_ = false;  ///< from_first_wait(), not started yet
};

/// CLOCK_MONOTONIC_COARSE: the steady clock's own time line (CLOCK_MONOTONIC) as of the last timer tick, without a
/// TSC read. Not for deadlines: on a tickless kernel an idle machine's coarse clock can lag by more than a tick (a
/// deadline started from it ended at 11.8 ms of a 15 ms timeout in CI's run), so it only stamps records.
Clock::time_point coarse_now() noexcept;

/// "1.5 s", "300 ms", "infinite": for error messages.
std::string format_duration(Duration d);
/// "0 B", "17 B", "4.0 KiB", "256.0 MiB": for error messages.
std::string format_bytes(std::size_t bytes);

/// Spin, then yield, then sleep up to max_sleep. Call pause() once per unsuccessful poll; reset() after progress.
/// The phases are timed, not counted, so a poll that costs more (a syscall) does not stretch the spin: a peer that
/// answers within kSpinTime is seen at once; one that answers within kYieldTime costs a yield per poll (nothing,
/// when the core is idle; the core for another rank, when oversubscribed); after that the waiter sleeps.
/// How long to spin depends on whether the core is this rank's own (set_oversubscribed(), from init, which
/// compares every local rank's published affinity: transports/placement.hpp):
///   - shared with other ranks of the node: a peer that has not answered is waiting for a core for certain, so the
///     spin is only kOversubscribedSpinPolls polls (50 µs of spin once made a small all_reduce cost 108 µs with two
///     ranks on one core);
///   - the rank's own: a small message's answer comes within a microsecond or two, and a yield is a system call
///     (0.3 µs or more on a VM) that would add to the latency's tail, so the waiter spins for kSpinTime before it
///     yields; the core has nothing else of this job's to run.
/// Affinity does not say everything: ranks allowed every core (mpirun --bind-to none) are sometimes put on one core
/// by the scheduler for a while, and then every wait spun kSpinTime before the peer could run (session 10: an
/// unbound all_reduce of 64 KiB took 103-146 µs a call, p50, for a whole size, against 5-8 µs). So a yield is timed:
/// one that returns after kSharedYield, or later, let something else run on this core, which is shared right now;
/// every wait of the process then spins only kOversubscribedSpinPolls until kSharedFor has passed without such a
/// yield (core_shared_now()) - unless every other rank is bound to other cores (set_cores_alone()).
class Backoff {
 public:
  static constexpr std::chrono::microseconds kSpinTime{20};
  static constexpr unsigned kOversubscribedSpinPolls = 4;
  static constexpr std::chrono::microseconds kYieldTime{2000};
  static constexpr std::chrono::microseconds kSharedYield{5};
  static constexpr std::chrono::milliseconds kSharedFor{20};
  /// `shared_spin_polls`: the polls a wait spins before it yields where cores are shared (a waiter that expects its
  /// answer within about a microsecond may spin more: MeshImpl::wait).
  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(1000),
                   unsigned shared_spin_polls = kOversubscribedSpinPolls)
      : max_sleep_(max_sleep), shared_spin_polls_(shared_spin_polls) {}
  /// Process-wide: whether this node runs more ranks than this process has cores.
  static void set_oversubscribed(bool oversubscribed) noexcept;
  /// Process-wide: whether no other rank may run on this process's cores (bound ranks, each to cores of its own).
  /// A slow yield then tells nothing about the peers (something else ran here: another job, the hypervisor), so it
  /// does not make waits spin briefly: yielding after 4 polls would add a system call to every wait for 20 ms
  /// while the peer, on its own core, answers within a microsecond.
  static void set_cores_alone(bool alone) noexcept;
  /// Process-wide: whether a yield within the last kSharedFor let something else run on its core (tests).
  static bool core_shared_now() noexcept;
  void pause();
  void reset() {
    polls_ = 0;
    phase_ = Phase::kSpin;
  }
  /// Whether the wait has gone past its spin (yields or sleeps now).
  bool spun_out() const { return phase_ != Phase::kSpin; }

 private:
  enum class Phase { kSpin, kYield, kSleep };
  std::chrono::microseconds max_sleep_;
  unsigned shared_spin_polls_;
  unsigned polls_ = 0;
  Phase phase_ = Phase::kSpin;
  bool short_spin_ = false;  ///< this wait spins briefly: cores shared, by placement or by a recent slow yield
  Clock::time_point since_{};
};

}  // namespace dcomm
