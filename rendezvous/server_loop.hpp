#pragma once
// The TCP store server's event loop: accepts clients, reads frames, hands requests to the StoreService and
// writes responses back, all on one thread over non-blocking sockets and epoll. Strangers are bounded before they
// authenticate: a hello of at most 4 KiB, within hello_timeout, at most max_pending_clients of them at once.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "rendezvous/hello.hpp"
#include "rendezvous/log_limiter.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/socket.hpp"
#include "rendezvous/store_service.hpp"

namespace dcomm::rdzv {

class ServerLoop {
 public:
  struct Config {
    std::string url;     // for log lines: "tcp://127.0.0.1:29500"
    std::string secret;  // resolved; empty: no secret
    JobIdentity job;
    TcpStoreOptions limits;  // caps and timeouts (its secret and job fields are not read)
  };
  ServerLoop(Config config, Fd listener);
  ~ServerLoop();

  /// Serves until request_stop(). Runs on the server's thread.
  void run() noexcept;
  /// Wakes the loop and makes run() return; callable from any thread.
  void request_stop() noexcept;
  const std::string& url() const { return config_.url; }

 private:
  struct Conn {
    Fd fd;
    std::string peer;
    proto::Bytes in;   // bytes received and not yet handled
    proto::Bytes out;  // bytes to send
    std::size_t out_off = 0;
    bool authed = false;
    bool want_write = false;
    Clock::time_point accepted;
    Clock::time_point last_input;  // when bytes last arrived (a partial frame that stalls is closed)
  };

  void accept_all();
  void on_readable(uint64_t id);
  /// Handles every complete frame buffered for the connection, until one parks or the buffer runs dry.
  /// Returns false when the connection was dropped.
  bool handle_frames(uint64_t id, Conn& c);
  /// Drops a connection whose next frame header is unacceptable before its payload is buffered.
  bool check_frame_header(uint64_t id, Conn& c, const proto::Header& h);
  bool handle_hello(uint64_t id, Conn& c, const uint8_t* payload, std::size_t n);
  /// Tells the client why before closing it (best effort), then drops it.
  bool refuse(uint64_t id, Conn& c, const std::string& reason, const std::string& kind);
  /// Queues a frame and writes what it can; returns false when the connection was dropped.
  bool send(uint64_t id, Conn& c, const proto::Bytes& frame);
  /// Writes what it can; returns false when the connection was dropped.
  bool flush(uint64_t id, Conn& c);
  void deliver_completed();
  /// Closes the connection and forgets its parked request, logging why (warnings fold per `kind`, see
  /// LogLimiter). Returns false, for `return drop(...)`.
  bool drop(uint64_t id, const std::string& reason, bool warn = true, const std::string& kind = "dropped");
  void update_interest(uint64_t id, Conn& c);
  /// Accepts while fewer than max_pending_clients are unauthenticated and descriptors are left; else leaves
  /// new connections in the kernel's listen queue.
  void update_listener();
  /// Closes connections that did not authenticate in time or stalled in the middle of a frame.
  void sweep(Clock::time_point now);
  int wait_ms() const;

  Config config_;
  Fd listener_;
  Fd epoll_;
  Fd wake_;  // eventfd: request_stop() writes it
  StoreService service_;
  LogLimiter log_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;  // 0 is the listener, 1 the wake-up eventfd
  Clock::time_point accept_paused_until_{};  // out of descriptors: no accepts until then
  bool listening_ = true;
  std::size_t pending_ = 0;   // connections not yet authenticated
  std::size_t buffered_ = 0;  // bytes in every connection's in and out buffers
  std::size_t max_frame_;
};

}  // namespace dcomm::rdzv
