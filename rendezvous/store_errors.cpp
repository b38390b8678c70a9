#include "rendezvous/store_errors.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"

#include <fmt/format.h>

namespace dcomm::rdzv {

std::string quote_keys(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 8;
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > kShown) out += fmt::format(" and {} more", keys.size() - kShown);
  return out;
}

void throw_store_timeout(const char* op, const std::vector<std::string>& keys,
                         const std::vector<std::string>& missing, const std::string& where, Duration waited,
                         Duration timeout) {
  throw TimeoutError(fmt::format(
      "store {}({}) on {}: {} {} not set after {} (timeout {}); the process that sets {} may not have started or "
      "may have failed - check its log",
      op, quote_keys(keys), where, missing.size() == 1 ? "key" : "keys", quote_keys(missing),
      format_duration(waited), format_duration(timeout), missing.size() == 1 ? "it" : "them"));
}

void check_timeout_arg(const char* op, Duration timeout) {
  if (timeout < Duration(0) && timeout != kDefaultTimeout) {
    throw InvalidUsageError(fmt::format("store {}: timeout {} ms is negative; pass a duration >= 0, "
                                        "kDefaultTimeout or kNoTimeout",
                                        op, timeout.count()));
  }
}

}  // namespace dcomm::rdzv
