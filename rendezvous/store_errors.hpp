#pragma once
// Messages shared by every store, so that a timeout reads the same whichever store ran out of patience.

#include <dcomm/types.hpp>

#include <string>
#include <vector>

namespace dcomm::rdzv {

/// The timeout a call uses: the one given, or the store's own for kDefaultTimeout.
inline Duration effective_timeout(Duration given, Duration store_default) {
  return given == kDefaultTimeout ? store_default : given;
}

/// "'a', 'b' and 3 more": a bounded list of keys for messages.
std::string quote_keys(const std::vector<std::string>& keys);

/// Throws TimeoutError: "store get('k') on tcp://h:p: key 'k' not set after 1.0 s (timeout 1.0 s); ...".
[[noreturn]] void throw_store_timeout(const char* op, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& missing, const std::string& where,
                                      Duration waited, Duration timeout);

/// Rejects a negative timeout other than the named constants (a caller mistake).
void check_timeout_arg(const char* op, Duration timeout);

}  // namespace dcomm::rdzv
