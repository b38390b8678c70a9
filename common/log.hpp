#pragma once
// One small logging facility. The level comes from DCOMM_LOG_LEVEL (error, warn, info, debug, trace in any case,
// or 0-4 in that order; default warn). Every line carries a timestamp and, once known, the rank:
// "[dcomm 06:03:01.123456 r2/4 W] message".

#include <fmt/format.h>

#include <string_view>

namespace dcomm::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

/// "info", "INFO", "Warning", "2", ... -> the level; false for anything else.
bool parse_level(std::string_view text, Level* out) noexcept;
Level level() noexcept;
/// Text put before every line of this process (dcomm-run sets "dcomm-run: "); empty by default.
void set_line_prefix(const char* prefix) noexcept;
void set_level(Level l) noexcept;
/// Called once the process knows its rank; until then lines carry the pid.
void set_rank(int rank, int world_size) noexcept;
void write(Level l, std::string_view message) noexcept;

inline bool enabled(Level l) noexcept { return static_cast<int>(l) <= static_cast<int>(level()); }

}  // namespace dcomm::log

// Formats only when the level is enabled.
#define DCOMM_LOG(lvl, ...)                                                            \
  do {                                                                                 \
    if (::dcomm::log::enabled(::dcomm::log::Level::lvl))                               \
      ::dcomm::log::write(::dcomm::log::Level::lvl, ::fmt::format(__VA_ARGS__));       \
  } while (0)
#define DCOMM_ERROR(...) DCOMM_LOG(kError, __VA_ARGS__)
#define DCOMM_WARN(...) DCOMM_LOG(kWarn, __VA_ARGS__)
#define DCOMM_INFO(...) DCOMM_LOG(kInfo, __VA_ARGS__)
#define DCOMM_DEBUG(...) DCOMM_LOG(kDebug, __VA_ARGS__)
#define DCOMM_TRACE(...) DCOMM_LOG(kTrace, __VA_ARGS__)
