#include "rendezvous/secret.hpp"

#include "common/env.hpp"

namespace dcomm::rdzv {

std::string resolve_secret(const std::string& given) {
  if (!given.empty()) return given;
  return env::get("DCOMM_STORE_SECRET").value_or("");
}

bool secrets_equal(const std::string& a, const std::string& b) noexcept {
  // Walk the longer length in full and fold every difference into one accumulator: no early exit.
  std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0u;
    unsigned cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0u;
    diff |= ca ^ cb;
  }
  return diff == 0;
}

}  // namespace dcomm::rdzv
