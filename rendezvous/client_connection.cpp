#include "rendezvous/client_connection.hpp"

#include <dcomm/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace dcomm::rdzv {
namespace {

constexpr auto kFirstRetryPause = std::chrono::milliseconds(10);
constexpr auto kMaxRetryPause = std::chrono::milliseconds(1000);
// A server answers the hello at once; this bounds a connect that lands on something that is not a store.
constexpr auto kHelloTimeout = std::chrono::seconds(10);

std::string describe_io(IoResult r, int err) {
  switch (r) {
    case IoResult::kOk: return "ok";
    case IoResult::kTimeout: return "timed out";
    case IoResult::kClosed: return "the server closed the connection";
    case IoResult::kError: return fmt::format("{} (errno {})", std::strerror(err), err);
  }
  return "unknown";
}

}  // namespace

ClientConnection::ClientConnection(std::string host, uint16_t port, Hello hello)
    : host_(std::move(host)), port_(port), hello_(std::move(hello)), url_(tcp_url(host_, port_)) {
  encode_hello(hello_);  // checks the fields' limits now, not at the first connect
}

void ClientConnection::connect(Duration timeout) {
  Deadline deadline = Deadline::after(timeout);
  auto pause = std::chrono::duration_cast<Duration>(kFirstRetryPause);
  int attempts = 0;
  int err = 0;
  std::string reason;
  for (;;) {
    ++attempts;
    if (attempt(deadline, &err, &reason)) return;
    // remaining() rounds down to milliseconds: stop at zero rather than retry in a tight loop for the last one.
    if (deadline.expired() || deadline.remaining() == Duration(0)) break;
    // Exponential backoff: the server (rank 0 or dcomm-run) is usually just starting up.
    std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
    pause = std::min(pause * 2, std::chrono::duration_cast<Duration>(kMaxRetryPause));
  }
  throw TimeoutError(fmt::format(
      "connect to TCP store {}: no connection after {} (timeout {}, {} attempts); last error: {}; check that the "
      "store's server is up (rank 0 hosts it, or dcomm-run) and that MASTER_ADDR/MASTER_PORT (DCOMM_MASTER_ADDR/"
      "DCOMM_MASTER_PORT) name it",
      url_, format_duration(deadline.elapsed()), format_duration(timeout), attempts, reason));
}

bool ClientConnection::attempt(const Deadline& deadline, int* err, std::string* reason) {
  std::string resolve_error;
  auto addrs = resolve(host_, port_, /*passive=*/false, &resolve_error);
  if (addrs.empty()) {
    *err = 0;
    *reason = resolve_error;
    return false;
  }
  Fd fd = try_connect(addrs, deadline, err, reason);
  if (!fd.valid()) return false;
  fd_ = std::move(fd);
  std::optional<Response> response;
  try {
    response = exchange(encode_hello(hello_),
                        Deadline::after(std::min(deadline.remaining(), Duration(kHelloTimeout))), "hello");
  } catch (const Error& e) {
    // Accepted, then closed: a server still starting, or at its descriptor limit. Worth another try.
    *err = ECONNRESET;
    *reason = e.what();
    return false;
  }
  if (!response) {
    *err = ETIMEDOUT;
    *reason = "connected, but the server did not answer the hello (is it a dcomm store?)";
    return false;
  }
  if (response->status != proto::Status::kOk) {
    close();
    std::string why = proto::Reader(response->payload.data(), response->payload.size()).str();
    throw InvalidUsageError(fmt::format("connect to TCP store {} as {}: {}", url_, hello_.job.describe(), why));
  }
  return true;
}

std::optional<ClientConnection::Response> ClientConnection::exchange(const proto::Bytes& frame,
                                                                     const Deadline& deadline,
                                                                     const std::string& what) {
  int err = 0;
  auto fail = [&](IoResult r) -> std::optional<Response> {
    close();
    if (r == IoResult::kTimeout) return std::nullopt;
    std::string msg = fmt::format("TCP store {}: {} failed: {}", url_, what, describe_io(r, err));
    if (r == IoResult::kClosed) {
      throw RemoteError(msg + "; the server stopped or dropped this client - check the log of the process hosting "
                              "the store (rank 0 or dcomm-run)");
    }
    throw SystemError(msg, err);
  };
  IoResult r = send_all(fd_.get(), frame.data(), frame.size(), deadline, &err);
  if (r != IoResult::kOk) return fail(r);
  uint8_t header[proto::kHeaderBytes];
  r = recv_all(fd_.get(), header, sizeof header, deadline, &err);
  if (r != IoResult::kOk) return fail(r);
  proto::Header h;
  if (auto bad = proto::check_header(header, &h)) {
    close();
    throw RemoteError(fmt::format("TCP store {}: {}: the response has {}; is {} really a dcomm store?", url_, what,
                                  *bad, url_));
  }
  Response resp{static_cast<proto::Status>(h.code), proto::Bytes(h.length)};
  r = recv_all(fd_.get(), resp.payload.data(), resp.payload.size(), deadline, &err);
  if (r != IoResult::kOk) return fail(r);
  return resp;
}

}  // namespace dcomm::rdzv
