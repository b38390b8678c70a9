#include "rendezvous/server_loop.hpp"

#include <dcomm/error.hpp>

#include "common/log.hpp"
#include "rendezvous/secret.hpp"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dcomm::rdzv {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int kMaxEvents = 256;
constexpr std::size_t kReadChunk = 64 * 1024;
// When the process runs out of descriptors, stop accepting for a while instead of spinning on the listener.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// How often the loop looks for connections past their timeouts (and writes folded warnings): the timeouts are
// seconds, so a quarter second late is fine, and a wake-up 4 times a second costs nothing.
constexpr int kSweepMs = 250;
constexpr auto kLogInterval = std::chrono::seconds(10);

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
      service_(config_.limits.max_key_bytes, config_.limits.max_value_bytes),
      log_(fmt::format("TCP store server {}: ", config_.url), kLogInterval),
      max_frame_(proto::max_payload(config_.limits.max_key_bytes, config_.limits.max_value_bytes)) {
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

int ServerLoop::wait_ms() const {
  // Nothing to time out and nothing folded to write: sleep until an event.
  if (conns_.empty() && !log_.pending() && listening_) return -1;
  return kSweepMs;
}

void ServerLoop::run() noexcept {
  epoll_event events[kMaxEvents];
  bool stopping = false;
  Clock::time_point next_sweep = Clock::now();
  while (!stopping) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, wait_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      DCOMM_ERROR("TCP store server {}: epoll_wait failed: {}; the store stops serving", config_.url,
                  std::strerror(errno));
      break;
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
    Clock::time_point now = Clock::now();
    if (now >= next_sweep) {
      sweep(now);
      next_sweep = now + std::chrono::milliseconds(kSweepMs);
    }
  }
  DCOMM_DEBUG("TCP store server {}: stopping with {} clients and {} keys", config_.url, conns_.size(),
              service_.num_keys());
  conns_.clear();
}

void ServerLoop::sweep(Clock::time_point now) {
  std::vector<std::pair<uint64_t, std::string>> late;
  for (const auto& [id, c] : conns_) {
    if (!c->authed && now - c->accepted >= config_.limits.hello_timeout) {
      late.emplace_back(id, fmt::format("did not authenticate within {} ({} bytes received); closed (hello_timeout)",
                                        format_duration(config_.limits.hello_timeout), c->in.size()));
    } else if (c->authed && !c->in.empty() && !service_.parked(id) &&
               now - c->last_input >= config_.limits.stalled_frame_timeout) {
      late.emplace_back(id, fmt::format("sent {} of a frame, then nothing for {}; closed (stalled_frame_timeout)",
                                        format_bytes(c->in.size()), format_duration(std::chrono::duration_cast<Duration>(now - c->last_input))));
    }
  }
  for (const auto& [id, why] : late) drop(id, why, true, "timeout");
  if (!listening_ && now >= accept_paused_until_) update_listener();
  log_.flush(now);
}

void ServerLoop::update_listener() {
  bool want = pending_ < config_.limits.max_pending_clients && Clock::now() >= accept_paused_until_;
  if (want == listening_) return;
  listening_ = want;
  epoll_set(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), want ? EPOLLIN : 0u, kListenerId);
  if (!want && pending_ >= config_.limits.max_pending_clients) {
    log_.warn("pending", fmt::format("{} clients have connected and not yet authenticated (max_pending_clients); "
                                     "new connections wait in the listen queue until some authenticate or time out",
                                     pending_));
  }
}

void ServerLoop::accept_all() {
  while (listening_) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      log_.warn("accept", fmt::format("cannot accept more clients ({} connected): {}; pausing accepts for {} (raise "
                                      "`ulimit -n`?)",
                                      conns_.size(), std::strerror(errno), format_duration(kAcceptPause)));
      accept_paused_until_ = Clock::now() + kAcceptPause;
      update_listener();
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd.reset(fd);
    c->peer = format_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    c->accepted = c->last_input = Clock::now();
    set_nodelay(fd);
    uint64_t id = next_id_++;
    epoll_set(epoll_.get(), EPOLL_CTL_ADD, fd, EPOLLIN, id);
    DCOMM_DEBUG("TCP store server {}: client {} connected", config_.url, c->peer);
    conns_.emplace(id, std::move(c));
    ++pending_;
    update_listener();
  }
}

void ServerLoop::on_readable(uint64_t id) {
  Conn& c = *conns_.at(id);
  uint8_t buf[kReadChunk];
  for (;;) {
    // A stranger never needs more than one hello: read no more than that before it authenticates.
    std::size_t want = c.authed ? sizeof buf : std::min(sizeof buf, proto::kHeaderBytes + kMaxHelloBytes);
    ssize_t r = ::recv(c.fd.get(), buf, want, 0);
    if (r > 0) {
      if (buffered_ + static_cast<std::size_t>(r) > config_.limits.max_buffered_bytes) {
        drop(id, fmt::format("the server already buffers {} of requests over all clients (max_buffered_bytes {})",
                             format_bytes(buffered_), format_bytes(config_.limits.max_buffered_bytes)));
        return;
      }
      c.in.insert(c.in.end(), buf, buf + r);
      buffered_ += static_cast<std::size_t>(r);
      c.last_input = Clock::now();
      if (!handle_frames(id, c)) return;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r < 0) {
      drop(id, fmt::format("receive failed: {}", std::strerror(errno)), true, c.authed ? "dropped" : "stranger");
    } else if (!c.in.empty()) {
      drop(id, fmt::format("disconnected in the middle of a request ({} bytes of it received)", c.in.size()), true,
           c.authed ? "dropped" : "stranger");
    } else {
      drop(id, service_.parked(id) ? "disconnected while waiting for a key" : "disconnected", /*warn=*/false);
    }
    return;
  }
}

bool ServerLoop::check_frame_header(uint64_t id, Conn& c, const proto::Header& h) {
  auto problem = frame_problem(h, c.authed, max_frame_);
  if (!problem) return true;
  if (problem->tell_client) return refuse(id, c, problem->reason, "stranger");
  return drop(id, problem->reason);
}

bool ServerLoop::handle_frames(uint64_t id, Conn& c) {
  std::size_t off = 0;
  while (!service_.parked(id) && c.in.size() - off >= proto::kHeaderBytes) {
    proto::Header h;
    if (auto bad = proto::check_header(c.in.data() + off, &h)) {
      return drop(id, *bad, true, c.authed ? "dropped" : "stranger");
    }
    if (!check_frame_header(id, c, h)) return false;
    if (c.in.size() - off < proto::kHeaderBytes + h.length) break;
    auto op = static_cast<proto::Op>(h.code);
    const uint8_t* payload = c.in.data() + off + proto::kHeaderBytes;
    off += proto::kHeaderBytes + h.length;
    if (op == proto::Op::kHello) {
      if (c.authed) return drop(id, "sent a second hello");
      if (!handle_hello(id, c, payload, h.length)) return false;
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
  buffered_ -= off;
  // An honest client sends nothing while its request is parked; refuse to buffer without bound for one that does.
  if (service_.parked(id) && c.in.size() > max_frame_ + proto::kHeaderBytes) {
    return drop(id, fmt::format("sent {} more while its request was parked", format_bytes(c.in.size())));
  }
  return true;
}

bool ServerLoop::handle_hello(uint64_t id, Conn& c, const uint8_t* payload, std::size_t n) {
  Hello hello;
  try {
    hello = decode_hello(payload, n);
  } catch (const proto::ProtocolError& e) {
    return refuse(id, c, fmt::format("malformed hello: {}", e.reason), "stranger");
  }
  if (!config_.secret.empty() && !secrets_equal(hello.secret, config_.secret)) {
    return refuse(id, c,
                  fmt::format("{} secret: the store's shared secret does not match this client's; set "
                              "DCOMM_STORE_SECRET (or DCOMM_STORE_SECRET_FILE, TcpStoreOptions::secret) to the job's "
                              "secret",
                              hello.secret.empty() ? "no" : "a wrong"),
                  "secret");
  }
  if (auto mismatch = job_mismatch(config_.job, hello.job)) return refuse(id, c, *mismatch, "job");
  c.authed = true;
  --pending_;
  update_listener();
  DCOMM_DEBUG("TCP store server {}: client {} authenticated ({})", config_.url, c.peer, hello.job.describe());
  return send(id, c, proto::Writer().frame(static_cast<uint8_t>(proto::Status::kOk)));
}

bool ServerLoop::refuse(uint64_t id, Conn& c, const std::string& reason, const std::string& kind) {
  // Best effort: the reply is tiny and the socket's send buffer empty, so it does not block.
  proto::Bytes reply = error_frame(fmt::format("the TCP store {} refused this client: {}", config_.url, reason));
  ssize_t ignored = ::send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  return drop(id, reason, true, kind);
}

bool ServerLoop::send(uint64_t id, Conn& c, const proto::Bytes& frame) {
  c.out.insert(c.out.end(), frame.begin(), frame.end());
  buffered_ += frame.size();
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
    buffered_ -= c.out.size();
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

bool ServerLoop::drop(uint64_t id, const std::string& reason, bool warn, const std::string& kind) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return false;
  Conn& c = *it->second;
  if (warn) {
    // Strangers' drops fold apart from members': a flood of them must not hide the one that matters.
    log_.warn(kind == "dropped" && !c.authed ? "stranger" : kind, fmt::format("dropping client {}: {}", c.peer, reason));
  } else {
    DCOMM_DEBUG("TCP store server {}: client {} {}", config_.url, c.peer, reason);
  }
  buffered_ -= c.in.size() + c.out.size();
  if (!c.authed) --pending_;
  service_.forget(id);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  conns_.erase(it);
  update_listener();
  return false;
}

}  // namespace dcomm::rdzv
