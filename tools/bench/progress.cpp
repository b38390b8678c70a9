#include "tools/bench/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace dcomm::bench {

namespace {

// stderr is a terminal, or a pipe to a dcomm-run whose stderr is one (it shows a redrawn line as its status line).
bool terminal_sees_stderr() {
  if (isatty(STDERR_FILENO) != 0) return true;
  const char* v = std::getenv("DCOMM_RUN_TTY");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace

Progress::Progress(std::size_t total, bool enabled) : total_(total), bar_(enabled && terminal_sees_stderr()) {}

void Progress::clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void Progress::step(const std::string& what) {
  ++done_;
  if (!bar_ || total_ == 0) return;
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = done_ * kWidth / total_;
  std::fputs(fmt::format("\r\033[K[{}{}] {}/{} {}", std::string(filled, '#'), std::string(kWidth - filled, '.'), done_,
                         total_, what)
                 .c_str(),
             stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() { clear(); }

}  // namespace dcomm::bench
