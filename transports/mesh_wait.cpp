// Mesh::wait: the one place a rank blocks on a point-to-point request. It progresses (or backs off while
// another thread does), watches the peer's liveness every liveness_interval, and turns a deadline or a dead peer
// into an error that names the op, the peer, the transport, the bytes and the times, then poisons the mesh.
#include <fmt/format.h>

#include "transports/mesh_impl.hpp"
#include "transports/tags.hpp"

namespace dcomm::transport {
namespace {

// The wire tag as a person reads it (transports/tags.hpp): "tag 5", "call 42 step 1 of group 3".
std::string describe_tag(uint64_t tag) {
  const uint64_t context = tag >> 32;
  std::string group = context == 0 ? std::string() : fmt::format(" of group {}", context);
  if (((tag >> 31) & 1) == 0) return fmt::format("tag {}{}", tag & kMaxUserTag, group);
  return fmt::format("collective call {} step {}{}", (tag >> 11) & 0xFFFFF, tag & (kMaxCollectiveSteps - 1), group);
}

}  // namespace

std::string MeshImpl::describe(const Request& r) const {
  bool send = r.kind == Request::Kind::kSend;
  std::string who = r.peer == kAnySource ? "any rank" : fmt::format("rank {}", r.peer);
  std::string over;
  if (r.transport != nullptr) {
    over = r.transport->name();
  } else {
    // An any-source receive not matched yet: list every transport it could arrive over.
    for (const auto& t : transports_) over.append(over.empty() ? "" : ",").append(t->name());
    if (over.empty()) over = self_.name();
  }
  return fmt::format("{} {} {} ({}) over {} ({})", send ? "send" : "recv", send ? "to" : "from", who,
                     describe_tag(r.tag), over, format_bytes(r.capacity));
}

void MeshImpl::fail_wait(std::exception_ptr cause) {
  poison(cause);
  std::rethrow_exception(cause);
}

void MeshImpl::wait(Request& r, const Deadline& deadline, const WaitWhat& what) {
  throw_if_poisoned();
  if (!r.op->done()) deadline.arm();
  // Where ranks share cores a wait spins a few polls and yields (common/deadline.hpp). A small message from a peer
  // that is running comes within about a microsecond: a wait for one from a peer that may run while this rank does
  // (any but one bound to this rank's single core) spins kQuickAnswerPolls first, rather than handing its core to
  // a rank that then runs a whole time slice before this one sees the answer. sendrecv 8 B p50 / OpenMPI's: 4 ranks
  // on 2 cores bound in pairs across the cores 1.5-2.0 -> 0.4-1.0; unbound (the scheduler places them) 1.4-2.2 ->
  // 0.41-0.45 in 4 runs of 6 (2.6-2.8 us in the others, as before: pairs put on one core); 3 ranks unbound 0.48-0.64
  // -> 0.39-0.41 us. Larger messages take longer than a short spin, which then only delays the ranks sharing this
  // core (4-32 KiB measured 1.45-1.85x with it, 1.06-1.26 without), so they keep the short one.
  // But where the scheduler put the peer on this rank's core (ranks allowed every core), its answer never comes
  // within the spin, and every message paid the spin before the yield that lets the peer run: 4 ranks unbound,
  // sendrecv 8-512 B p50 2.2-3.4 us in runs where a pair shared a core, against OpenMPI's 1.2-1.5 (0.26-0.64 where
  // the pairs were across the cores). So a peer whose last quick spins saw no answer gets the core at once, and one
  // receive in a few tries the quick spin again (transports/quick_spins.hpp).
  bool quick = r.kind == Request::Kind::kRecv && r.capacity <= kQuickAnswerBytes && r.peer >= 0 &&
               r.peer < size() && quick_answer_[static_cast<std::size_t>(r.peer)];
  QuickSpins* spins = quick ? quick_spins_[static_cast<std::size_t>(r.peer)].get() : nullptr;
  if (spins != nullptr) quick = spins->spin_quick();
  // A peer that answers only after this rank yields (QuickSpins) gets the core at the first poll that finds nothing.
  Backoff backoff(std::chrono::microseconds(1000),
                  quick ? kQuickAnswerPolls : spins != nullptr ? 1u : Backoff::kOversubscribedSpinPolls);
  // Set at the first clock reading: most waits end within a few polls and never read the clock at all.
  Clock::time_point next_liveness{};
  // The clock is read (for the deadline and the liveness check) once every kClockEvery polls: a poll that finds
  // nothing costs ~100 ns, and two clock reads per poll were a tenth of a small message's latency.
  constexpr unsigned kClockEvery = 32;
  unsigned polls = 0;
  for (;;) {
    if (r.cancelled) return;
    if (r.op->done()) break;
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(poisoned());
    bool moved = false;
    std::optional<Blame> dead;
    {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        moved = progress_locked();
        if (!r.op->done() && polls > 0 && polls % kClockEvery == 0) {
          auto now = Clock::now();
          if (next_liveness == Clock::time_point{}) {
            next_liveness = now + options_.liveness_interval;
          } else if (now >= next_liveness) {
            dead = blame_locked(r);
            next_liveness = now + options_.liveness_interval;
          }
        }
      }
    }
    if (r.op->done()) break;
    if (dead) {
      fail_wait(make_error(dead->code, fmt::format("{}: {} failed after {} (timeout {}): {}; check rank {}'s log",
                                                   what.str(), describe(r), format_duration(deadline.elapsed()),
                                                   format_duration(deadline.timeout()), dead->text, dead->rank)));
    }
    if (++polls % kClockEvery == 0 && deadline.expired()) {
      std::string peer_hint = r.peer == kAnySource
                                  ? std::string("no rank sent a matching message")
                                  : fmt::format("rank {} (pid {} on {}) may be stuck, may not have posted the matching "
                                                "{}, or may have exited",
                                                r.peer, peer(r.peer).pid, peer(r.peer).hostname,
                                                r.kind == Request::Kind::kSend ? "receive" : "send");
      fail_wait(make_error(ErrorCode::kTimeout,
                           fmt::format("{}: {} not done after {} (timeout {}); {} - check its log", what.str(),
                                       describe(r), format_duration(deadline.elapsed()),
                                       format_duration(deadline.timeout()), peer_hint)));
    }
    if (moved) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
  if (quick && spins != nullptr) spins->saw(!backoff.spun_out());
  if (r.op->state() == Op::State::kDone) {
    r.received = r.op->bytes();
    return;
  }
  // The op failed: repeat its error with `what` in front. A receive that was too small stays the caller's
  // problem alone; anything else means a peer or a transport broke, so the mesh is poisoned.
  std::exception_ptr cause = r.op->error();
  try {
    std::rethrow_exception(cause);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidUsage) {
      std::rethrow_exception(make_error(e.code(), fmt::format("{}: {}", what.str(), e.what())));
    }
    // Named like a dead peer's wait above: the request (peer, transport, bytes), how long it ran and its timeout.
    fail_wait(make_error(e.code(), fmt::format("{}: {} failed after {} (timeout {}): {}", what.str(), describe(r),
                                               format_duration(deadline.elapsed()),
                                               format_duration(deadline.timeout()), explain_op_failure(r, e.what()))));
  } catch (const std::exception& e) {
    fail_wait(make_error(ErrorCode::kInternal, fmt::format("{}: {} failed after {} (timeout {}): {}", what.str(),
                                                           describe(r), format_duration(deadline.elapsed()),
                                                           format_duration(deadline.timeout()), e.what())));
  }
}

}  // namespace dcomm::transport

namespace dcomm::transport {

void MeshImpl::wait_until(bool (*ready)(const void* arg), std::string (*awaited)(const void* arg), const void* arg,
                          int peer, const Deadline& deadline, std::string_view what) {
  if (ready(arg)) return;  // the common case: the peer was there first, and the wait costs one read
  // A collective's deadline starts here (Deadline::from_first_wait). Leaving it to the first clock check, 64 polls
  // on, was measured slower (8 B all_reduce 0.19-0.20 us against 0.17-0.18): the clock read also spaces the first
  // polls of the line the peer is about to write.
  deadline.arm();
  throw_if_poisoned();
  // Stands for the awaited peer in the liveness check (blame_locked asks about r.peer).
  Request probe;
  probe.kind = Request::Kind::kRecv;
  probe.peer = peer;
  Backoff backoff;
  Clock::time_point next_liveness{};
  // The mesh is progressed every kProgressEvery polls only: the peer writes the awaited memory itself, and what
  // the mesh carries meanwhile (an eager send of an earlier call still in a backlog) can wait a few polls.
  constexpr unsigned kProgressEvery = 16;
  constexpr unsigned kClockEvery = 64;
  for (unsigned polls = 1;; ++polls) {
    if (ready(arg)) return;
    if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(poisoned());
    bool moved = false;
    std::optional<Blame> dead;
    if (polls % kProgressEvery == 0) {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        moved = progress_locked();
        if (polls % kClockEvery == 0) {
          auto now = Clock::now();
          if (next_liveness == Clock::time_point{}) {
            next_liveness = now + options_.liveness_interval;
          } else if (now >= next_liveness) {
            dead = blame_locked(probe);
            next_liveness = now + options_.liveness_interval;
          }
        }
      }
    }
    if (ready(arg)) return;
    if (dead) {
      fail_wait(make_error(dead->code,
                           fmt::format("{}: waiting for {} failed after {} (timeout {}): {}; check rank {}'s log", what,
                                       awaited(arg), format_duration(deadline.elapsed()),
                                       format_duration(deadline.timeout()), dead->text, dead->rank)));
    }
    if (polls % kClockEvery == 0 && deadline.expired()) {
      fail_wait(make_error(
          ErrorCode::kTimeout,
          fmt::format("{}: {} not written after {} (timeout {}); rank {} (pid {} on {}) may be stuck, may not have "
                      "made this call, or may have exited - check its log",
                      what, awaited(arg), format_duration(deadline.elapsed()), format_duration(deadline.timeout()), peer,
                      this->peer(peer).pid, this->peer(peer).hostname)));
    }
    if (moved) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace dcomm::transport
