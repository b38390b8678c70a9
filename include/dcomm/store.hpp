#pragma once
/// The key-value store through which processes find each other, in the shape of c10d's Store.
/// Every blocking call is bounded by the store's timeout (or the one given) and throws dcomm::TimeoutError
/// naming the key(s), the store's address and the time waited.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dcomm/types.hpp>

namespace dcomm {

class Store {
 public:
  using Bytes = std::vector<uint8_t>;
  virtual ~Store() = default;

  /// Sets key to value, waking anyone waiting on it.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// Returns the value of key, waiting up to the store's timeout for it to be set.
  virtual Bytes get(const std::string& key) = 0;
  /// Atomically adds delta to the integer counter at key (created at 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Sets key to desired if its current value equals expected (or if it is missing and expected is empty);
  /// returns the value the key holds afterwards.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  /// Whether every key exists right now. Never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Waits until every key exists; throws TimeoutError naming the missing keys when the timeout passes.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout = kDefaultTimeout) = 0;
  /// Deletes key; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;
  /// How many keys the store holds.
  virtual int64_t num_keys() = 0;
  /// get for several keys at once (one round trip on a TcpStore).
  virtual std::vector<Bytes> multi_get(const std::vector<std::string>& keys);
  /// set for several keys at once.
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values);

  /// The timeout get() and wait() use by default.
  virtual Duration timeout() const = 0;
  virtual void set_timeout(Duration timeout) = 0;
  /// Where the store is, for error messages: "tcp://10.0.0.1:29500", "memory", "prefix 'pg1/' of ...".
  virtual std::string describe() const = 0;

  // Conveniences over the byte interface.
  void set(const std::string& key, const std::string& value) { set(key, Bytes(value.begin(), value.end())); }
  std::string get_string(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }
};

/// A store that keeps its keys in this process: for threads-as-ranks tests.
std::shared_ptr<Store> make_memory_store(Duration timeout = std::chrono::seconds(30));

/// A view of another store under a key prefix, so independent users (groups, rounds) cannot collide.
std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> inner);

/// Options of the TCP store's client and server.
struct TcpStoreOptions {
  Duration timeout = std::chrono::seconds(300);         ///< get / wait bound, and the connect deadline
  std::size_t max_key_bytes = 4096;                    ///< larger keys are refused by the server
  std::size_t max_value_bytes = 64u << 20;              ///< larger values are refused by the server
  /// Shared secret; empty means DCOMM_STORE_SECRET, else the file DCOMM_STORE_SECRET_FILE (unset: no secret).
  /// A server that listens beyond loopback refuses to start without one unless allow_unauthenticated.
  std::string secret{};
  /// Run without a secret although the server listens beyond loopback (also DCOMM_STORE_INSECURE=1). Logged.
  bool allow_unauthenticated = false;
  /// The job a client or server belongs to: a server refuses a client whose job differs from its own, naming
  /// both. Empty / 0 mean unknown, which matches any job. bootstrap() and dcomm-run fill them in.
  std::string run_id{};
  int64_t world_size = 0;
  // Server bounds on clients that have not authenticated, or that stall (docs/store.md, "Limits").
  Duration hello_timeout = std::chrono::seconds(5);           ///< not authenticated by then: closed
  Duration stalled_frame_timeout = std::chrono::seconds(30);  ///< a partial frame with no progress this long: closed
  std::size_t max_pending_clients = 256;  ///< unauthenticated connections at once; more wait in the listen queue
  std::size_t max_buffered_bytes = std::size_t{1} << 30;  ///< request bytes buffered over all clients
};

/// The TCP store's server: one epoll event-loop thread serving every client. Port 0 picks a free port. An empty
/// bind_host means 127.0.0.1; "0.0.0.0" (or "::") listens on every interface and then needs a secret.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual uint16_t port() const = 0;
  virtual std::string host() const = 0;
  /// Stops serving; clients then see their connection closed. Idempotent.
  virtual void stop() = 0;
};
std::unique_ptr<TcpStoreServer> start_tcp_store_server(const std::string& bind_host, uint16_t port,
                                                       const TcpStoreOptions& opts = {});

/// A client of a TCP store; connects with retry and backoff until the options' timeout.
std::shared_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port, const TcpStoreOptions& opts = {});

}  // namespace dcomm
