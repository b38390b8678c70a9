#include "tools/bench/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace dcomm::bench {

Progress::Progress(std::size_t total, bool enabled) : total_(total), bar_(enabled && isatty(STDERR_FILENO) != 0) {}

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
