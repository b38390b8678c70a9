#pragma once
// What the TCP store server does with one decoded request, apart from any socket: apply it to the key table and
// produce the response, or park it until the keys it waits for exist. The event loop (tcp_store_server.cpp)
// owns the sockets; this class owns the keys and the parked requests. Single-threaded: the loop thread only.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rendezvous/kv_table.hpp"
#include "rendezvous/protocol.hpp"

namespace dcomm::rdzv {

class StoreService {
 public:
  using ConnId = uint64_t;
  StoreService(std::size_t max_key_bytes, std::size_t max_value_bytes)
      : max_key_bytes_(max_key_bytes), max_value_bytes_(max_value_bytes) {}

  /// Handles one request (not kHello). Returns the response frame, or nullopt when the request is parked until
  /// its keys exist. A caller mistake (oversize key or value, add on a non-counter) becomes an error response;
  /// a malformed payload throws proto::ProtocolError and the caller drops the client.
  std::optional<proto::Bytes> handle(ConnId conn, proto::Op op, const uint8_t* payload, std::size_t n);

  /// Responses to parked requests that the last handle() completed, with their connections.
  std::vector<std::pair<ConnId, proto::Bytes>> take_completed() { return std::exchange(completed_, {}); }

  /// Whether a request of this connection is parked (the loop reads no further request from it meanwhile).
  bool parked(ConnId conn) const { return parked_.count(conn) != 0; }
  /// Forgets a connection's parked request (it disconnected), so nothing waits for it any more.
  void forget(ConnId conn);

  int64_t num_keys() const { return table_.size(); }

 private:
  struct Parked {
    proto::Op op;
    std::vector<std::string> keys;
    uint64_t seq;
    std::string waiting_on;  // the key under which it is registered in waiters_
  };
  struct Waiter {
    ConnId conn;
    uint64_t seq;  // which parked request of the connection registered; a stale one is skipped
  };

  std::optional<proto::Bytes> dispatch(ConnId conn, proto::Op op, proto::Reader& in);
  std::optional<proto::Bytes> get_or_park(ConnId conn, proto::Op op, std::vector<std::string> keys);
  proto::Bytes answer(proto::Op op, const std::vector<std::string>& keys) const;
  void set_key(const std::string& key, proto::Bytes value);
  /// Re-examines the requests waiting on key after it was set.
  void wake(const std::string& key);
  void check_key(const std::string& key) const;
  void check_value(const std::string& key, const proto::Bytes& value) const;

  std::size_t max_key_bytes_;
  std::size_t max_value_bytes_;
  KvTable table_;
  std::unordered_map<ConnId, Parked> parked_;
  std::unordered_map<std::string, std::vector<Waiter>> waiters_;
  std::vector<std::pair<ConnId, proto::Bytes>> completed_;
  uint64_t next_seq_ = 0;
};

/// An error response frame carrying reason.
proto::Bytes error_frame(const std::string& reason);

}  // namespace dcomm::rdzv
