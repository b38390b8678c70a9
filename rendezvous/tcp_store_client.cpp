// The TCP store's client. One connection, one request in flight: a mutex makes a request/response round trip
// atomic, so threads may share a client (a blocking get holds it for at most its timeout). The client, not the
// server, enforces timeouts: on expiry it closes the connection (the server then forgets the parked request)
// and reconnects on the next call.

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "rendezvous/client_connection.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/secret.hpp"
#include "rendezvous/store_errors.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

namespace dcomm {
namespace {

namespace proto = rdzv::proto;
using proto::Op;

// Bounds the follow-up checks that name which of several keys were missing when a wait timed out.
constexpr auto kMissingProbeTimeout = std::chrono::seconds(2);

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(const std::string& host, uint16_t port, const TcpStoreOptions& opts)
      : opts_(opts), timeout_(opts.timeout), conn_(host, port, {rdzv::resolve_secret(opts.secret), {opts.run_id, opts.world_size}}) {
    std::lock_guard<std::mutex> lock(mu_);
    conn_.connect(opts.timeout);
  }

  void set(const std::string& key, const Bytes& value) override {
    check_value("set", key, value);
    call(Op::kSet, proto::Writer().str(key).bytes(value), {key});
  }

  Bytes get(const std::string& key) override {
    check_key("get", key);
    Bytes r = call(Op::kGet, proto::Writer().str(key), {key}, kDefaultTimeout);
    return proto::Reader(r.data(), r.size()).bytes();
  }

  int64_t add(const std::string& key, int64_t delta) override {
    check_key("add", key);
    Bytes r = call(Op::kAdd, proto::Writer().str(key).i64(delta), {key});
    return proto::Reader(r.data(), r.size()).i64();
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    check_value("compare_set", key, desired);
    Bytes r = call(Op::kCompareSet, proto::Writer().str(key).bytes(expected).bytes(desired), {key});
    return proto::Reader(r.data(), r.size()).bytes();
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) check_key("check", k);
    Bytes r = call(Op::kCheck, proto::Writer().keys(keys), keys);
    return proto::Reader(r.data(), r.size()).u8() != 0;
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    rdzv::check_timeout_arg("wait", timeout);
    for (const auto& k : keys) check_key("wait", k);
    call(Op::kWait, proto::Writer().keys(keys), keys, timeout);
  }

  bool delete_key(const std::string& key) override {
    Bytes r = call(Op::kDelete, proto::Writer().str(key), {key});
    return proto::Reader(r.data(), r.size()).u8() != 0;
  }

  int64_t num_keys() override {
    Bytes r = call(Op::kNumKeys, proto::Writer(), {});
    return proto::Reader(r.data(), r.size()).i64();
  }

  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) check_key("multi_get", k);
    Bytes r = call(Op::kMultiGet, proto::Writer().keys(keys), keys, kDefaultTimeout);
    proto::Reader in(r.data(), r.size());
    std::vector<Bytes> out(in.u32());
    for (auto& v : out) v = in.bytes();
    return out;
  }

  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;

  Duration timeout() const override { return timeout_.load(); }
  void set_timeout(Duration timeout) override {
    rdzv::check_timeout_arg("set_timeout", timeout);
    timeout_.store(rdzv::effective_timeout(timeout, timeout_.load()));
  }
  std::string describe() const override { return conn_.url(); }

 private:
  // Sends one request and returns the OK response's payload. `blocking_timeout` is set for get/wait/multi_get,
  // which may wait for keys; other requests are bounded by the store's timeout as a guard against a hung server.
  Bytes call(Op op, const proto::Writer& w, const std::vector<std::string>& keys,
             std::optional<Duration> blocking_timeout = std::nullopt);
  std::vector<std::string> probe_missing(const std::vector<std::string>& keys);
  void check_key(const char* op, const std::string& key) const;
  void check_value(const char* op, const std::string& key, const Bytes& value) const;

  TcpStoreOptions opts_;
  std::atomic<Duration> timeout_;
  std::mutex mu_;
  rdzv::ClientConnection conn_;
};

Store::Bytes TcpStoreClient::call(Op op, const proto::Writer& w, const std::vector<std::string>& keys,
                                  std::optional<Duration> blocking_timeout) {
  Bytes frame = w.frame(static_cast<uint8_t>(op));
  Duration timeout = rdzv::effective_timeout(blocking_timeout.value_or(kDefaultTimeout), timeout_.load());
  std::string what = fmt::format("{}({})", proto::to_string(op), rdzv::quote_keys(keys));
  std::lock_guard<std::mutex> lock(mu_);
  if (!conn_.connected()) conn_.connect(timeout_.load());
  Deadline deadline = Deadline::after(timeout);
  auto response = conn_.exchange(frame, deadline, what);
  if (!response) {
    if (blocking_timeout) {
      rdzv::throw_store_timeout(proto::to_string(op), keys, probe_missing(keys), conn_.url(), deadline.elapsed(),
                                timeout);
    }
    throw TimeoutError(fmt::format("TCP store {}: {} got no response after {} (timeout {}); the server may be "
                                   "overloaded or stuck - check the process hosting it (rank 0 or dcomm-run)",
                                   conn_.url(), what, format_duration(deadline.elapsed()), format_duration(timeout)));
  }
  if (response->status != proto::Status::kOk) {
    std::string why = proto::Reader(response->payload.data(), response->payload.size()).str();
    throw InvalidUsageError(fmt::format("TCP store {}: {} refused: {}", conn_.url(), what, why));
  }
  return std::move(response->payload);
}

std::vector<std::string> TcpStoreClient::probe_missing(const std::vector<std::string>& keys) {
  if (keys.size() <= 1) return keys;
  // Which keys were missing is worth a few quick checks: it names the rank that did not arrive.
  std::vector<std::string> missing;
  try {
    conn_.connect(kMissingProbeTimeout);
    for (const auto& k : keys) {
      auto r = conn_.exchange(proto::Writer().keys({k}).frame(static_cast<uint8_t>(Op::kCheck)),
                              Deadline::after(kMissingProbeTimeout), "check");
      if (!r || r->status != proto::Status::kOk) return keys;
      if (proto::Reader(r->payload.data(), r->payload.size()).u8() == 0) missing.push_back(k);
    }
  } catch (const Error&) {
    return keys;
  }
  return missing.empty() ? keys : missing;
}

void TcpStoreClient::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) Store::multi_set(keys, values);  // reports the mismatch
  // Pairs go in batches that fit the server's frame limit; each batch is applied atomically.
  std::size_t limit = proto::max_payload(opts_.max_key_bytes, opts_.max_value_bytes) - proto::kFrameSlack / 2;
  std::size_t i = 0;
  while (i < keys.size()) {
    proto::Writer w;
    std::size_t first = i;
    std::size_t bytes = 0;
    for (; i < keys.size(); ++i) {
      check_value("multi_set", keys[i], values[i]);
      std::size_t pair = keys[i].size() + values[i].size() + 8;
      if (i > first && bytes + pair > limit) break;
      bytes += pair;
    }
    w.u32(static_cast<uint32_t>(i - first));
    for (std::size_t j = first; j < i; ++j) w.str(keys[j]).bytes(values[j]);
    call(Op::kMultiSet, w, std::vector<std::string>(keys.begin() + first, keys.begin() + i));
  }
}

void TcpStoreClient::check_key(const char* op, const std::string& key) const {
  if (key.size() > opts_.max_key_bytes) {
    throw InvalidUsageError(fmt::format("TCP store {}: {}: key of {} exceeds max_key_bytes ({})", conn_.url(), op,
                                        format_bytes(key.size()), format_bytes(opts_.max_key_bytes)));
  }
}

void TcpStoreClient::check_value(const char* op, const std::string& key, const Bytes& value) const {
  check_key(op, key);
  if (value.size() > opts_.max_value_bytes) {
    throw InvalidUsageError(fmt::format("TCP store {}: {}('{}'): value of {} exceeds max_value_bytes ({})",
                                        conn_.url(), op, key.substr(0, 200), format_bytes(value.size()),
                                        format_bytes(opts_.max_value_bytes)));
  }
}

}  // namespace

std::shared_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port, const TcpStoreOptions& opts) {
  rdzv::check_timeout_arg("connect_tcp_store", opts.timeout);
  if (host.empty()) throw InvalidUsageError("connect_tcp_store: the host is empty; pass an address or name");
  TcpStoreOptions o = opts;
  if (o.timeout == kDefaultTimeout) o.timeout = std::chrono::seconds(300);
  return std::make_shared<TcpStoreClient>(host, port, o);
}

}  // namespace dcomm
