#pragma once
// Rate-limited warnings for the store server: under a flood (thousands of strangers connecting and closing) one
// warning per event would flood the log and slow the server itself (issue 13 saw 312,000 lines in 106 s). The
// first warning of a kind in an interval is written in full; the rest of that interval are counted and folded
// into one line when the interval ends: "... and 4,211 more like it in the last 10.0 s".

#include <map>
#include <string>

#include "common/deadline.hpp"

namespace dcomm::rdzv {

class LogLimiter {
 public:
  /// `prefix` starts every line ("TCP store server tcp://127.0.0.1:29500: ").
  LogLimiter(std::string prefix, Duration interval) : prefix_(std::move(prefix)), interval_(interval) {}
  ~LogLimiter() { flush(Clock::time_point::max()); }

  /// Writes or counts a warning of this kind.
  void warn(const std::string& kind, const std::string& message, Clock::time_point now = Clock::now());
  /// Writes the folded counts of the intervals that ended before `now`. Call it now and then.
  void flush(Clock::time_point now = Clock::now());
  /// Whether some warnings are counted and not yet written.
  bool pending() const;

 private:
  struct Kind {
    Clock::time_point interval_start;
    long long suppressed = 0;
    std::string last;
  };
  void write_folded(Kind& k);

  std::string prefix_;
  Duration interval_;
  std::map<std::string, Kind> kinds_;
};

}  // namespace dcomm::rdzv
