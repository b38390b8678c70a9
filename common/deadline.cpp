#include "common/deadline.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DCOMM_CPU_RELAX() _mm_pause()
#else
#define DCOMM_CPU_RELAX() ((void)0)
#endif

namespace dcomm {

Deadline Deadline::after(Duration timeout) {
  if (timeout == kNoTimeout) return never();
  Clock::time_point now = Clock::now();  // one clock read: this runs on every operation
  return Deadline(now, now + timeout, timeout);
}

void Deadline::start_now() const {
  lazy_ = false;
  start_ = Clock::now();
  at_ = timeout_ == kNoTimeout ? Clock::time_point::max() : start_ + timeout_;
}

Clock::time_point coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                        std::chrono::nanoseconds(ts.tv_nsec)));
}

Duration Deadline::elapsed() const {
  arm();
  return std::chrono::duration_cast<Duration>(Clock::now() - start_);
}

Duration Deadline::remaining() const {
  arm();
  if (at_ == Clock::time_point::max()) return kNoTimeout;
  return std::max(Duration(0), std::chrono::duration_cast<Duration>(at_ - Clock::now()));
}

std::string format_duration(Duration d) {
  if (d == kNoTimeout) return "infinite";
  if (d < std::chrono::seconds(1)) return fmt::format("{} ms", d.count());
  return fmt::format("{:.1f} s", static_cast<double>(d.count()) / 1000.0);
}

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

namespace {

std::atomic<bool> g_oversubscribed{false};
std::atomic<bool> g_cores_alone{false};
// Until when (steady clock, ns since its epoch) waits spin briefly: a yield that let something else run.
std::atomic<int64_t> g_shared_until{0};

int64_t ticks(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

void Backoff::set_oversubscribed(bool oversubscribed) noexcept {
  g_oversubscribed.store(oversubscribed, std::memory_order_relaxed);
}

void Backoff::set_cores_alone(bool alone) noexcept { g_cores_alone.store(alone, std::memory_order_relaxed); }

bool Backoff::core_shared_now() noexcept { return ticks(Clock::now()) < g_shared_until.load(std::memory_order_relaxed); }

void Backoff::pause() {
  if (polls_++ == 0) {
    since_ = Clock::now();
    short_spin_ = g_oversubscribed.load(std::memory_order_relaxed) ||
                  ticks(since_) < g_shared_until.load(std::memory_order_relaxed);
  }
  // Reading the clock costs ~20 ns: the phase is re-checked every 16 polls.
  const bool check = polls_ % 16 == 0;
  switch (phase_) {
    case Phase::kSpin:
      if (short_spin_ ? polls_ >= shared_spin_polls_ : check && Clock::now() - since_ >= kSpinTime) {
        phase_ = Phase::kYield;
      }
      DCOMM_CPU_RELAX();
      return;
    case Phase::kYield: {
      const Clock::time_point before = Clock::now();
      if (before - since_ >= kYieldTime) phase_ = Phase::kSleep;
      sched_yield();
      // Something else ran on this core meanwhile (a peer put here by the scheduler, another job): shared now -
      // unless no peer may run here.
      if (g_cores_alone.load(std::memory_order_relaxed)) return;
      const Clock::time_point after = Clock::now();
      if (after - before >= kSharedYield) {
        g_shared_until.store(ticks(after + kSharedFor), std::memory_order_relaxed);
      }
      return;
    }
    case Phase::kSleep: {
      auto step = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since_ - kYieldTime) / 8;
      std::this_thread::sleep_for(std::clamp(step, std::chrono::microseconds(20), max_sleep_));
      return;
    }
  }
}

}  // namespace dcomm
