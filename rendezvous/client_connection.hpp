#pragma once
// One client connection to a TCP store server: connect with retry and exponential backoff, the hello with the
// shared secret and the job identity, and request/response exchanges bounded by a deadline. Not thread-safe: TcpStoreClient locks.

#include <cstdint>
#include <optional>
#include <string>

#include "common/deadline.hpp"
#include "rendezvous/hello.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/socket.hpp"

namespace dcomm::rdzv {

class ClientConnection {
 public:
  ClientConnection(std::string host, uint16_t port, Hello hello);

  /// "tcp://host:port".
  const std::string& url() const { return url_; }
  bool connected() const { return fd_.valid(); }
  /// Connects, retrying with backoff until timeout, and says hello. Throws TimeoutError naming the address, the
  /// time tried and the last error; InvalidUsageError when the server refuses this client's secret.
  void connect(Duration timeout);
  void close() { fd_.reset(); }

  struct Response {
    proto::Status status;
    proto::Bytes payload;
  };
  /// Sends one request frame and reads its response. Returns nullopt when the deadline passes first; the
  /// connection is then closed, because the late response would otherwise be read as the next one's.
  /// Throws RemoteError when the server closes the connection, SystemError on other socket errors.
  std::optional<Response> exchange(const proto::Bytes& frame, const Deadline& deadline, const std::string& what);

 private:
  /// One attempt: connect to every resolved address, then hello. Returns false (with *err, *reason) to retry.
  bool attempt(const Deadline& deadline, int* err, std::string* reason);

  std::string host_;
  uint16_t port_;
  Hello hello_;
  std::string url_;
  Fd fd_;
};

}  // namespace dcomm::rdzv
