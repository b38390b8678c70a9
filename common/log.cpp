#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace dcomm::log {
namespace {

Level level_from_env() {
  const char* v = std::getenv("DCOMM_LOG_LEVEL");
  Level l = Level::kWarn;
  if (v == nullptr || parse_level(v, &l)) return l;
  std::fprintf(stderr,
               "[dcomm] DCOMM_LOG_LEVEL='%s' is not one of error, warn, info, debug, trace (any case) or 0-4; "
               "using warn\n",
               v);
  return Level::kWarn;
}

std::atomic<const char*> g_prefix{""};

std::atomic<int>& level_storage() {
  static std::atomic<int> l{static_cast<int>(level_from_env())};
  return l;
}
std::atomic<int> g_rank{-1};
std::atomic<int> g_size{-1};

constexpr char kLetters[] = {'E', 'W', 'I', 'D', 'T'};

}  // namespace

bool parse_level(std::string_view text, Level* out) noexcept {
  static constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
  std::string s;
  for (char c : text) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (s == "warning") s = "warn";
  for (int i = 0; i < 5; ++i) {
    if (s == kNames[i] || s == std::to_string(i)) {
      *out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

void set_line_prefix(const char* prefix) noexcept { g_prefix.store(prefix != nullptr ? prefix : ""); }

Level level() noexcept { return static_cast<Level>(level_storage().load(std::memory_order_relaxed)); }
void set_level(Level l) noexcept { level_storage().store(static_cast<int>(l)); }
void set_rank(int rank, int world_size) noexcept {
  g_rank.store(rank);
  g_size.store(world_size);
}

void write(Level l, std::string_view message) noexcept {
  try {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    localtime_r(&t, &tm);
    int rank = g_rank.load();
    std::string who = rank >= 0 ? fmt::format("r{}/{}", rank, g_size.load()) : fmt::format("pid {}", ::getpid());
    std::string line = fmt::format("{}[dcomm {:02}:{:02}:{:02}.{:06} {} {}] {}\n", g_prefix.load(), tm.tm_hour,
                                   tm.tm_min, tm.tm_sec, us, who, kLetters[static_cast<int>(l)], message);
    // One write() per line so lines from threads and processes do not interleave.
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
  } catch (...) {
    // Logging must never throw.
  }
}

}  // namespace dcomm::log
