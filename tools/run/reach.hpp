#pragma once
// Why a store address cannot be reached right now, in one phrase for dcomm-run's messages.

#include <string>

namespace dcomm::run {

/// One connect attempt to addr:port: e.g. "connection refused (nothing listens on 127.0.0.1:29500)",
/// "address not resolved: ...", or "it accepts connections but did not answer as a dcomm store".
std::string unreachable_reason(const std::string& addr, int port);

}  // namespace dcomm::run
