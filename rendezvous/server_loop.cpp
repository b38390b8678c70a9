#include "rendezvous/server_loop.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"
#include "common/log.hpp"
#include "rendezvous/secret.hpp"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dcomm::rdzv {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int kMaxEvents = 256;
constexpr std::size_t kReadChunk = 64 * 1024;
// When the process runs out of descriptors, stop accepting for a while instead of spinning on the listener.
constexpr int kAcceptPauseMs = 100;

void epoll_set(int epfd, int op, int fd, uint32_t events, uint64_t id) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epfd, op, fd, &ev) != 0) throw SystemError("epoll_ctl", errno);
}

}  // namespace

ServerLoop::ServerLoop(Config config, Fd listener)
    : config_(std::move(config)),
      listener_(std::move(listener)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      service_(config_.max_key_bytes, config_.max_value_bytes),
      max_frame_(proto::max_payload(config_.max_key_bytes, config_.max_value_bytes)) {
  if (!epoll_.valid()) throw SystemError("TCP store server: epoll_create1", errno);
  if (!wake_.valid()) throw SystemError("TCP store server: eventfd", errno);
  epoll_set(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), EPOLLIN, kListenerId);
  epoll_set(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), EPOLLIN, kWakeId);
}

ServerLoop::~ServerLoop() = default;

void ServerLoop::request_stop() noexcept {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof one);
  (void)ignored;
}

void ServerLoop::run() noexcept {
  epoll_event events[kMaxEvents];
  bool stopping = false;
  while (!stopping) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, accept_paused_ms_ > 0 ? kAcceptPauseMs : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      DCOMM_ERROR("TCP store server {}: epoll_wait failed: {}; the store stops serving", config_.url,
                  std::strerror(errno));
      break;
    }
    if (n == 0 && accept_paused_ms_ > 0) {
      accept_paused_ms_ = 0;
      epoll_set(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), EPOLLIN, kListenerId);
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      try {
        if (id == kWakeId) {
          stopping = true;
        } else if (id == kListenerId) {
          accept_all();
        } else if (conns_.count(id) != 0) {
          if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(id);
          auto it = conns_.find(id);
          if (it != conns_.end() && (events[i].events & EPOLLOUT)) flush(id, *it->second);
        }
        deliver_completed();
      } catch (const std::exception& e) {
        // Out of memory or an epoll failure on one client: drop that client, keep serving the rest.
        if (id > kWakeId) drop(id, fmt::format("internal error while serving it: {}", e.what()));
      }
    }
  }
  DCOMM_DEBUG("TCP store server {}: stopping with {} clients and {} keys", config_.url, conns_.size(),
              service_.num_keys());
  conns_.clear();
}

void ServerLoop::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      DCOMM_WARN("TCP store server {}: cannot accept more clients ({} connected): {}; pausing accepts for {} ms "
                 "(raise `ulimit -n`?)",
                 config_.url, conns_.size(), std::strerror(errno), kAcceptPauseMs);
      accept_paused_ms_ = kAcceptPauseMs;
      epoll_set(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), 0, kListenerId);
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    c->peer = format_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    set_nodelay(fd);
    uint64_t id = next_id_++;
    epoll_set(epoll_.get(), EPOLL_CTL_ADD, fd, EPOLLIN, id);
    DCOMM_DEBUG("TCP store server {}: client {} connected", config_.url, c->peer);
    conns_.emplace(id, std::move(c));
  }
}

void ServerLoop::on_readable(uint64_t id) {
  Conn& c = *conns_.at(id);
  uint8_t buf[kReadChunk];
  for (;;) {
    ssize_t r = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (r > 0) {
      c.in.insert(c.in.end(), buf, buf + r);
      if (!handle_frames(id, c)) return;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r < 0) {
      drop(id, fmt::format("receive failed: {}", std::strerror(errno)));
    } else if (!c.in.empty()) {
      drop(id, fmt::format("disconnected in the middle of a request ({} bytes of it received)", c.in.size()));
    } else {
      drop(id, service_.parked(id) ? "disconnected while waiting for a key" : "disconnected", /*warn=*/false);
    }
    return;
  }
}

bool ServerLoop::handle_frames(uint64_t id, Conn& c) {
  std::size_t off = 0;
  while (!service_.parked(id) && c.in.size() - off >= proto::kHeaderBytes) {
    proto::Header h;
    if (auto bad = proto::check_header(c.in.data() + off, &h)) return drop(id, *bad);
    if (h.code == 0 || h.code > proto::kMaxOp) return drop(id, fmt::format("unknown opcode {}", h.code));
    auto op = static_cast<proto::Op>(h.code);
    if (h.length > max_frame_) {
      return drop(id, fmt::format("{} frame of {} exceeds the limit of {} (max_key_bytes + max_value_bytes + slack)",
                                  proto::to_string(op), format_bytes(h.length), format_bytes(max_frame_)));
    }
    if (c.in.size() - off < proto::kHeaderBytes + h.length) break;
    const uint8_t* payload = c.in.data() + off + proto::kHeaderBytes;
    off += proto::kHeaderBytes + h.length;
    if (!c.authed || op == proto::Op::kHello) {
      if (!handle_hello(id, c, op, payload, h.length)) return false;
      continue;
    }
    std::optional<proto::Bytes> response;
    try {
      response = service_.handle(id, op, payload, h.length);
    } catch (const proto::ProtocolError& e) {
      return drop(id, fmt::format("malformed {} request: {}", proto::to_string(op), e.reason));
    }
    if (response && !send(id, c, *response)) return false;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
  // An honest client sends nothing while its request is parked; refuse to buffer without bound for one that does.
  if (service_.parked(id) && c.in.size() > max_frame_ + proto::kHeaderBytes) {
    return drop(id, fmt::format("sent {} more while its request was parked", format_bytes(c.in.size())));
  }
  return true;
}

bool ServerLoop::handle_hello(uint64_t id, Conn& c, proto::Op op, const uint8_t* payload, std::size_t n) {
  if (op != proto::Op::kHello) {
    return drop(id, fmt::format("first request was {} instead of hello", proto::to_string(op)));
  }
  if (c.authed) return drop(id, "sent a second hello");
  std::string secret;
  try {
    proto::Reader in(payload, n);
    secret = in.str();
    in.expect_done();
  } catch (const proto::ProtocolError& e) {
    return drop(id, fmt::format("malformed hello: {}", e.reason));
  }
  if (!config_.secret.empty() && !secrets_equal(secret, config_.secret)) {
    // Tell the client why before closing, best effort: the reply is tiny and the socket buffer empty.
    proto::Bytes reply = error_frame("the store's shared secret does not match this client's; set "
                                     "DCOMM_STORE_SECRET (or TcpStoreOptions::secret) to the job's secret");
    ssize_t ignored = ::send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    return drop(id, secret.empty() ? "presented no secret" : "presented a wrong secret");
  }
  c.authed = true;
  return send(id, c, proto::Writer().frame(static_cast<uint8_t>(proto::Status::kOk)));
}

bool ServerLoop::send(uint64_t id, Conn& c, const proto::Bytes& frame) {
  c.out.insert(c.out.end(), frame.begin(), frame.end());
  return flush(id, c);
}

bool ServerLoop::flush(uint64_t id, Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_off += static_cast<std::size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      int err = errno;
      return drop(id, fmt::format("send failed: {}", std::strerror(err)), err != EPIPE && err != ECONNRESET);
    }
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  update_interest(id, c);
  return true;
}

void ServerLoop::update_interest(uint64_t id, Conn& c) {
  bool want = !c.out.empty();
  if (want == c.want_write) return;
  c.want_write = want;
  epoll_set(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), EPOLLIN | (want ? EPOLLOUT : 0u), id);
}

void ServerLoop::deliver_completed() {
  // A delivered response unparks its client, whose buffered requests may complete further parked ones.
  for (auto done = service_.take_completed(); !done.empty(); done = service_.take_completed()) {
    for (auto& [id, frame] : done) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      if (send(id, c, frame)) handle_frames(id, c);
    }
  }
}

bool ServerLoop::drop(uint64_t id, const std::string& reason, bool warn) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return false;
  if (warn) {
    DCOMM_WARN("TCP store server {}: dropping client {}: {}", config_.url, it->second->peer, reason);
  } else {
    DCOMM_DEBUG("TCP store server {}: client {} {}", config_.url, it->second->peer, reason);
  }
  service_.forget(id);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  conns_.erase(it);
  return false;
}

}  // namespace dcomm::rdzv
