#pragma once
// The TCP store server's event loop: accepts clients, reads frames, hands requests to the StoreService and
// writes responses back, all on one thread over non-blocking sockets and epoll.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "rendezvous/protocol.hpp"
#include "rendezvous/socket.hpp"
#include "rendezvous/store_service.hpp"

namespace dcomm::rdzv {

class ServerLoop {
 public:
  struct Config {
    std::string url;  // for log lines: "tcp://0.0.0.0:29500"
    std::string secret;
    std::size_t max_key_bytes;
    std::size_t max_value_bytes;
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
  };

  void accept_all();
  void on_readable(uint64_t id);
  /// Handles every complete frame buffered for the connection, until one parks or the buffer runs dry.
  /// Returns false when the connection was dropped.
  bool handle_frames(uint64_t id, Conn& c);
  bool handle_hello(uint64_t id, Conn& c, proto::Op op, const uint8_t* payload, std::size_t n);
  /// Queues a frame and writes what it can; returns false when the connection was dropped.
  bool send(uint64_t id, Conn& c, const proto::Bytes& frame);
  /// Writes what it can; returns false when the connection was dropped.
  bool flush(uint64_t id, Conn& c);
  void deliver_completed();
  /// Closes the connection and forgets its parked request, logging why. Returns false, for `return drop(...)`.
  bool drop(uint64_t id, const std::string& reason, bool warn = true);
  void update_interest(uint64_t id, Conn& c);

  Config config_;
  Fd listener_;
  Fd epoll_;
  Fd wake_;  // eventfd: request_stop() writes it
  StoreService service_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;  // 0 is the listener, 1 the wake-up eventfd
  int64_t accept_paused_ms_ = 0;
  std::size_t max_frame_;
};

}  // namespace dcomm::rdzv
