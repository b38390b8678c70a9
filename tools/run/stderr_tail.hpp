#pragma once
// The last lines of a rank's stderr for the failure summary. A crash handler's backtrace (UCX prints one of ~20
// frames on SIGSEGV) would push the rank's own last words out of a plain last-N window, so backtrace frames are
// counted but not kept: the summary shows the rank's own last lines and says how many frames it left out.

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace dcomm::run {

class StderrTail {
 public:
  explicit StderrTail(std::size_t lines) : capacity_(lines) {}

  void add(std::string_view line);
  /// The kept lines, oldest first, then "(N backtrace lines not shown; see the rank's stderr above)" if any were
  /// left out after the oldest kept line.
  std::vector<std::string> lines() const;

  /// A frame of a backtrace ("==== backtrace (tid: 7) ====", " 3  /lib/libucs.so.0(...) [0x7f...]", "=====").
  static bool is_backtrace_line(std::string_view line);

 private:
  std::size_t capacity_;
  std::deque<std::string> kept_;
  std::size_t frames_ = 0;  ///< backtrace lines seen since the oldest kept line
};

}  // namespace dcomm::run
