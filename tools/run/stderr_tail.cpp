#include "tools/run/stderr_tail.hpp"

#include <fmt/format.h>

namespace dcomm::run {

bool StderrTail::is_backtrace_line(std::string_view line) {
  std::size_t i = line.find_first_not_of(" \t");
  if (i == std::string_view::npos) return false;
  std::string_view s = line.substr(i);
  if (s.starts_with("==== backtrace")) return true;
  if (s.find_first_not_of('=') == std::string_view::npos && s.size() >= 8) return true;  // UCX's closing rule
  // A frame: "<n>  <location>" (two spaces, as UCX and gdb print them) whose location has a 0x address or offset.
  std::size_t digits = s.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string_view::npos || !s.substr(digits).starts_with("  ")) return false;
  return s.find("0x", digits) != std::string_view::npos;
}

void StderrTail::add(std::string_view line) {
  if (capacity_ == 0) return;
  if (is_backtrace_line(line)) {
    ++frames_;
    return;
  }
  kept_.emplace_back(line);
  if (kept_.size() > capacity_) kept_.pop_front();
}

std::vector<std::string> StderrTail::lines() const {
  std::vector<std::string> out(kept_.begin(), kept_.end());
  if (frames_ > 0) {
    out.push_back(
        fmt::format("({} backtrace line{} not shown; see the rank's stderr above)", frames_, frames_ == 1 ? "" : "s"));
  }
  return out;
}

}  // namespace dcomm::run
