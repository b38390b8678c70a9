#include "tools/bench/watchdog.hpp"

#include <cstdlib>

namespace dcomm::bench {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds limit, std::function<void()> on_stuck)
    : limit_(limit), on_stuck_(std::move(on_stuck)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm() { armed_at_ns_.store(now_ns(), std::memory_order_relaxed); }

void Watchdog::disarm() { armed_at_ns_.store(0, std::memory_order_relaxed); }

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  // Checking a few times a second is plenty: the limit is seconds past the call's own timeout.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) {
    const int64_t at = armed_at_ns_.load(std::memory_order_relaxed);
    if (at != 0 && now_ns() - at > std::chrono::duration_cast<std::chrono::nanoseconds>(limit_).count()) {
      on_stuck_();
      std::_Exit(1);
    }
  }
}

}  // namespace dcomm::bench
