#include "rendezvous/socket.hpp"

#include <dcomm/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace dcomm::rdzv {
namespace {

// poll() timeout for what is left of a deadline; capped so an infinite deadline still wakes up now and then.
int poll_ms(const Deadline& deadline) {
  constexpr long long kMaxSliceMs = 1000;
  long long left = deadline.remaining() == kNoTimeout ? kMaxSliceMs : deadline.remaining().count();
  return static_cast<int>(std::clamp(left, 0LL, kMaxSliceMs));
}

// Waits for `events` on fd. Returns 1 when ready, 0 when the deadline passed, -1 on error (errno set).
int wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, poll_ms(deadline));
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
    if (r == 0 && deadline.expired()) return 0;
  }
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string format_sockaddr(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = {0};
  char port[NI_MAXSERV] = {0};
  if (::getnameinfo(addr, len, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "<unknown address>";
  }
  if (addr->sa_family == AF_INET6) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string tcp_url(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return v6 ? fmt::format("tcp://[{}]:{}", host, port) : fmt::format("tcp://{}:{}", host, port);
}

std::vector<Resolved> resolve(const std::string& host, uint16_t port, bool passive, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  int rc = ::getaddrinfo(node, service.c_str(), &hints, &list);
  std::vector<Resolved> out;
  if (rc != 0) {
    *error = fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc));
    return out;
  }
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    Resolved r{a->ai_family, {}, static_cast<socklen_t>(a->ai_addrlen)};
    std::memcpy(&r.addr, a->ai_addr, a->ai_addrlen);
    out.push_back(r);
  }
  ::freeaddrinfo(list);
  return out;
}

bool is_loopback_host(const std::string& host) {
  if (host.empty()) return false;
  std::string error;
  auto addrs = resolve(host, 0, /*passive=*/false, &error);
  if (addrs.empty()) return false;
  for (const auto& a : addrs) {
    if (a.family == AF_INET) {
      uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(&a.addr)->sin_addr.s_addr);
      if ((ip >> 24) != 127) return false;
    } else if (a.family == AF_INET6) {
      if (!IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&a.addr)->sin6_addr)) return false;
    } else {
      return false;
    }
  }
  return true;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw SystemError("fcntl(O_NONBLOCK)", errno);
}

void set_nodelay(int fd) {
  int one = 1;
  // Store messages are small request/response pairs: Nagle would only add latency.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Fd try_connect(const std::vector<Resolved>& addrs, const Deadline& deadline, int* err, std::string* reason) {
  for (const Resolved& r : addrs) {
    Fd fd(::socket(r.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      *err = errno;
      *reason = fmt::format("socket(): {}", std::strerror(errno));
      continue;
    }
    const auto* sa = reinterpret_cast<const sockaddr*>(&r.addr);
    if (::connect(fd.get(), sa, r.len) != 0) {
      if (errno != EINPROGRESS) {
        *err = errno;
        *reason = fmt::format("connect to {}: {} (errno {})", format_sockaddr(sa, r.len), std::strerror(errno), errno);
        continue;
      }
      int ready = wait_ready(fd.get(), POLLOUT, deadline);
      int so_error = 0;
      socklen_t sl = sizeof so_error;
      if (ready <= 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &sl) != 0 || so_error != 0) {
        *err = ready == 0 ? ETIMEDOUT : (ready < 0 ? errno : so_error);
        *reason = fmt::format("connect to {}: {} (errno {})", format_sockaddr(sa, r.len), std::strerror(*err), *err);
        continue;
      }
    }
    set_nodelay(fd.get());
    return fd;
  }
  return Fd();
}

IoResult send_all(int fd, const uint8_t* data, std::size_t n, const Deadline& deadline, int* err) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t w = ::send(fd, data + done, n - done, MSG_NOSIGNAL);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_ready(fd, POLLOUT, deadline);
      if (r == 0) return IoResult::kTimeout;
      if (r < 0) {
        *err = errno;
        return IoResult::kError;
      }
      continue;
    }
    *err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

IoResult recv_all(int fd, uint8_t* data, std::size_t n, const Deadline& deadline, int* err) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::recv(fd, data + done, n - done, 0);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return IoResult::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = wait_ready(fd, POLLIN, deadline);
      if (w == 0) return IoResult::kTimeout;
      if (w < 0) {
        *err = errno;
        return IoResult::kError;
      }
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? IoResult::kClosed : IoResult::kError;
  }
  return IoResult::kOk;
}

}  // namespace dcomm::rdzv
