#pragma once
// The TCP store's shared secret: a client proves it belongs to the job by presenting the same secret as the
// server in its hello frame. It keeps a stray or malicious process on the network from reading or forging keys;
// it is not encryption (the traffic itself is plain).

#include <string>

namespace dcomm::rdzv {

/// The secret to use: the one given, else DCOMM_STORE_SECRET, else none (empty).
std::string resolve_secret(const std::string& given);

/// Compares in time that depends only on the lengths, so a client cannot find the secret byte by byte by timing.
bool secrets_equal(const std::string& a, const std::string& b) noexcept;

}  // namespace dcomm::rdzv
