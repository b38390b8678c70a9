#include "tools/run/status_line.hpp"

#include <unistd.h>

#include "tools/run/output_pump.hpp"

namespace dcomm::run {
namespace {

constexpr std::string_view kEraseLine = "\033[K";
constexpr std::string_view kClearLine = "\r\033[K";  // to the line's start, erase it

struct State {
  int fd = -1;
  std::string text;  ///< what is drawn now; empty: nothing
};

State& state() {
  static State s;
  return s;
}

}  // namespace

bool StatusLine::enabled() {
  static const bool on = ::isatty(STDERR_FILENO) != 0;
  return on;
}

void StatusLine::show(int fd, const std::string& text) {
  State& s = state();
  if (text.empty() && s.text.empty()) return;
  s.fd = fd;
  s.text = text;
  write_all(fd, kClearLine);
  write_all(fd, text);
}

void StatusLine::before_write() {
  State& s = state();
  if (!s.text.empty()) write_all(s.fd, kClearLine);
}

void StatusLine::after_write() {
  State& s = state();
  if (!s.text.empty()) write_all(s.fd, s.text);
}

std::string visible_after_carriage_return(std::string_view partial) {
  std::size_t cr = partial.rfind('\r');
  std::string out(cr == std::string_view::npos ? partial : partial.substr(cr + 1));
  for (std::size_t at; (at = out.find(kEraseLine)) != std::string::npos;) out.erase(at, kEraseLine.size());
  return out;
}

}  // namespace dcomm::run
