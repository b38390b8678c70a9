#pragma once
// A raw TCP client for feeding a store server bytes no honest client would send.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace dcomm::test {

class RawClient {
 public:
  explicit RawClient(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::runtime_error("raw client: connect failed");
    }
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  /// Sends what it can; a server that already hung up may refuse the rest, which is fine here.
  void send(const std::vector<uint8_t>& bytes) { (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  /// Sends everything, blocking; false when the server hung up first.
  bool send_all(const std::vector<uint8_t>& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t w = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += static_cast<std::size_t>(w);
    }
    return true;
  }
  /// Closes with a reset (SO_LINGER 0) instead of an orderly shutdown.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// Whether the server closed the connection within the time given (reading and discarding any reply).
  bool closed_by_server(std::chrono::milliseconds within = std::chrono::seconds(10)) {
    auto end = std::chrono::steady_clock::now() + within;
    uint8_t buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
    return false;
  }
  /// Reads one response frame's status byte (the header's sixth byte), or -1 when the connection closed first.
  int read_status() {
    uint8_t h[12];
    std::size_t got = 0;
    while (got < sizeof h) {
      ssize_t r = ::recv(fd_, h + got, sizeof h - got, 0);
      if (r <= 0) return -1;
      got += static_cast<std::size_t>(r);
    }
    uint32_t len = h[8] | (h[9] << 8) | (h[10] << 16) | (static_cast<uint32_t>(h[11]) << 24);
    std::vector<uint8_t> payload(len);
    got = 0;
    while (got < len) {
      ssize_t r = ::recv(fd_, payload.data() + got, len - got, 0);
      if (r <= 0) return -1;
      got += static_cast<std::size_t>(r);
    }
    return h[5];
  }

 private:
  int fd_;
};

}  // namespace dcomm::test
