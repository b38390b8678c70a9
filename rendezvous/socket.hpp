#pragma once
// Small POSIX socket helpers for the TCP store: an owning descriptor, name resolution, a bounded connect, and
// bounded send/receive of whole buffers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/socket.h>

#include "common/deadline.hpp"

namespace dcomm::rdzv {

/// Owns one file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// "10.0.0.1:29500" or "[::1]:29500".
std::string format_sockaddr(const sockaddr* addr, socklen_t len);
/// "tcp://host:port" for messages.
std::string tcp_url(const std::string& host, uint16_t port);

/// Resolves host:port with getaddrinfo (IPv4 and IPv6). On failure returns an empty list and sets *error.
struct Resolved {
  int family;
  sockaddr_storage addr;
  socklen_t len;
};
std::vector<Resolved> resolve(const std::string& host, uint16_t port, bool passive, std::string* error);

/// Whether every address host resolves to is a loopback one (127.0.0.0/8, ::1): "localhost", "127.0.0.1".
bool is_loopback_host(const std::string& host);

void set_nonblocking(int fd);
void set_nodelay(int fd);

/// One connect attempt to each resolved address until one succeeds within the deadline. Returns an invalid Fd
/// and sets *err (an errno) and *reason on failure.
Fd try_connect(const std::vector<Resolved>& addrs, const Deadline& deadline, int* err, std::string* reason);

enum class IoResult { kOk, kTimeout, kClosed, kError };
/// Writes all n bytes of a non-blocking socket, polling until the deadline. On kError, *err holds errno.
IoResult send_all(int fd, const uint8_t* data, std::size_t n, const Deadline& deadline, int* err);
/// Reads exactly n bytes, polling until the deadline. kClosed: the peer closed first.
IoResult recv_all(int fd, uint8_t* data, std::size_t n, const Deadline& deadline, int* err);

}  // namespace dcomm::rdzv
