#include "rendezvous/log_limiter.hpp"

#include "common/log.hpp"

namespace dcomm::rdzv {

void LogLimiter::warn(const std::string& kind, const std::string& message, Clock::time_point now) {
  auto [it, fresh] = kinds_.try_emplace(kind);
  Kind& k = it->second;
  if (!fresh && now - k.interval_start < interval_) {
    ++k.suppressed;
    k.last = message;
    return;
  }
  if (k.suppressed > 0) write_folded(k);
  k.interval_start = now;
  DCOMM_WARN("{}{}", prefix_, message);
}

void LogLimiter::flush(Clock::time_point now) {
  for (auto& [kind, k] : kinds_) {
    if (k.suppressed > 0 && (now == Clock::time_point::max() || now - k.interval_start >= interval_)) write_folded(k);
  }
}

bool LogLimiter::pending() const {
  for (const auto& [kind, k] : kinds_) {
    if (k.suppressed > 0) return true;
  }
  return false;
}

void LogLimiter::write_folded(Kind& k) {
  DCOMM_WARN("{}{} more warning(s) like this in {} (the last: {})", prefix_, k.suppressed, format_duration(interval_),
             k.last);
  k.suppressed = 0;
  k.last.clear();
}

}  // namespace dcomm::rdzv
