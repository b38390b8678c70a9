// The TCP store's server: one thread running an epoll loop over non-blocking sockets. It never blocks on a
// client: a get or wait whose keys are missing is parked in the StoreService and answered when a set makes it
// complete. A client that misbehaves (garbage, oversize frame, wrong secret, disconnect mid-request) is dropped
// with a warning naming it; every other client and every key is unaffected. It listens on loopback unless told
// otherwise, and beyond loopback only with a secret or an explicit, logged choice to run without one.

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "common/log.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/secret.hpp"
#include "rendezvous/server_loop.hpp"
#include "rendezvous/socket.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <mutex>
#include <thread>

namespace dcomm {
namespace {

using rdzv::Fd;

// What a failed bind means for the user, by errno: the usual two are a taken port and an address of another host.
std::string listen_hint(int err, const std::string& host, uint16_t port) {
  switch (err) {
    case EADDRINUSE:
      return fmt::format("port {} is in use (another dcomm-run or store?); choose another with MASTER_PORT "
                         "(--master-port), or port 0 for a free one",
                         port);
    case EADDRNOTAVAIL:
      return fmt::format("address not available: {} is not an address of this host; give one of this host's "
                         "addresses (see `ip -brief addr`) as MASTER_ADDR (--master-addr), or check the host name "
                         "resolves to this host",
                         host);
    case EACCES:
      return fmt::format("permission denied: ports below 1024 need privileges; use a port above 1024 (not {})", port);
    default:
      return "check the address and port (MASTER_ADDR/MASTER_PORT, --master-addr/--master-port)";
  }
}

Fd bind_listener(const std::string& host, uint16_t port) {
  std::string where = fmt::format("{}:{}", host.empty() ? "*" : host, port);
  std::string error;
  auto addrs = rdzv::resolve(host, port, /*passive=*/true, &error);
  if (addrs.empty()) throw InvalidUsageError(fmt::format("TCP store server: cannot bind {}: {}", where, error));
  int last_err = 0;
  for (const auto& a : addrs) {
    Fd fd(::socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    // A restarted job must be able to rebind the port while the old connections sit in TIME_WAIT.
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      last_err = errno;
      continue;
    }
    return fd;
  }
  throw SystemError(fmt::format("TCP store server: cannot listen on {}: {}", where, listen_hint(last_err, host, port)),
                    last_err);
}

uint16_t bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw SystemError("getsockname", errno);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

// Says at start whether the store is open, so that running without a secret is visible in the log.
void log_start(const std::string& url, const std::string& secret, bool loopback) {
  if (!secret.empty()) {
    DCOMM_INFO("TCP store server listening on {} (clients must present the job's secret)", url);
  } else if (loopback) {
    DCOMM_INFO("TCP store server listening on {} without a secret: any process on this host can read and write its "
               "keys (set DCOMM_STORE_SECRET to close it)",
               url);
  } else {
    DCOMM_WARN("TCP store server listening on {} WITHOUT a secret (chosen with DCOMM_STORE_INSECURE=1 or "
               "TcpStoreOptions::allow_unauthenticated): anyone who can reach this address can read and write its "
               "keys",
               url);
  }
}

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(const std::string& host, uint16_t port, const TcpStoreOptions& opts, std::string secret)
      : host_(host), listener_(bind_listener(host, port)), port_(bound_port(listener_.get())) {
    rdzv::ServerLoop::Config config{rdzv::tcp_url(host, port_), secret, {opts.run_id, opts.world_size}, opts};
    loop_ = std::make_unique<rdzv::ServerLoop>(std::move(config), std::move(listener_));
    thread_ = std::thread([this] { loop_->run(); });
    log_start(loop_->url(), secret, rdzv::is_loopback_host(host));
  }
  ~TcpStoreServerImpl() override { stop(); }

  uint16_t port() const override { return port_; }
  std::string host() const override { return host_; }
  void stop() override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!thread_.joinable()) return;
    loop_->request_stop();
    thread_.join();
  }

 private:
  std::string host_;
  Fd listener_;
  uint16_t port_;
  std::unique_ptr<rdzv::ServerLoop> loop_;
  std::thread thread_;
  std::mutex stop_mu_;
};

}  // namespace

std::unique_ptr<TcpStoreServer> start_tcp_store_server(const std::string& bind_host, uint16_t port,
                                                       const TcpStoreOptions& opts) {
  if (opts.max_key_bytes == 0 || opts.max_value_bytes > (std::size_t{1} << 31)) {
    throw InvalidUsageError(fmt::format("start_tcp_store_server: max_key_bytes {} must be > 0 and max_value_bytes {} "
                                        "at most 2 GiB (frames carry 32-bit lengths)",
                                        opts.max_key_bytes, opts.max_value_bytes));
  }
  if (opts.max_pending_clients == 0 || opts.hello_timeout <= Duration(0) || opts.stalled_frame_timeout <= Duration(0)) {
    throw InvalidUsageError("start_tcp_store_server: max_pending_clients, hello_timeout and stalled_frame_timeout "
                            "must be positive");
  }
  // Loopback unless asked otherwise: a store that other hosts need not reach must not be reachable from them.
  const std::string host = bind_host.empty() ? "127.0.0.1" : bind_host;
  std::string secret = rdzv::resolve_secret(opts.secret);
  if (secret.empty() && !rdzv::is_loopback_host(host) && !opts.allow_unauthenticated && !rdzv::insecure_chosen()) {
    throw InvalidUsageError(fmt::format("TCP store server on {}:{}: listening beyond loopback needs a shared secret, "
                                        "or anyone who reaches this address can read and forge the job's keys; {}",
                                        host, port, rdzv::kSecretHowTo));
  }
  return std::make_unique<TcpStoreServerImpl>(host, port, opts, std::move(secret));
}

}  // namespace dcomm
