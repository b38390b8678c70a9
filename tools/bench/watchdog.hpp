#pragma once
// The last line of defence against a silent hang. dcomm's own calls time out (CollectiveOptions::timeout), but
// an MPI call or a runtime bug may not; the watchdog then runs the report callback and ends the process.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace dcomm::bench {

class Watchdog {
 public:
  /// `on_stuck` runs on the watchdog's thread when one armed call outlives `limit`; the process then exits 1.
  Watchdog(std::chrono::milliseconds limit, std::function<void()> on_stuck);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm();     ///< a call begins
  void disarm();  ///< it returned

 private:
  void loop();

  std::chrono::milliseconds limit_;
  std::function<void()> on_stuck_;
  std::atomic<int64_t> armed_at_ns_{0};  // 0: disarmed
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dcomm::bench
