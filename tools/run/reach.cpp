#include "tools/run/reach.hpp"

#include <fmt/format.h>

#include <cerrno>

#include "common/deadline.hpp"
#include "rendezvous/socket.hpp"

namespace dcomm::run {
namespace {

constexpr Duration kProbeBound = std::chrono::seconds(1);

}  // namespace

std::string unreachable_reason(const std::string& addr, int port) {
  std::string reason;
  auto addrs = rdzv::resolve(addr, static_cast<uint16_t>(port), /*passive=*/false, &reason);
  if (addrs.empty()) return fmt::format("the address does not resolve ({})", reason);
  int err = 0;
  if (rdzv::try_connect(addrs, Deadline::after(kProbeBound), &err, &reason).valid()) {
    return "it accepts connections but did not answer as a dcomm store";
  }
  if (err == ECONNREFUSED) return fmt::format("connection refused (nothing listens on {}:{})", addr, port);
  return reason;
}

}  // namespace dcomm::run
