#include "rendezvous/store_service.hpp"

#include <dcomm/error.hpp>

#include "common/deadline.hpp"

#include <fmt/format.h>

namespace dcomm::rdzv {

using proto::Bytes;
using proto::Op;

Bytes error_frame(const std::string& reason) {
  return proto::Writer().str(reason).frame(static_cast<uint8_t>(proto::Status::kError));
}

namespace {
Bytes ok_frame(const proto::Writer& w = proto::Writer()) { return w.frame(static_cast<uint8_t>(proto::Status::kOk)); }
}  // namespace

std::optional<Bytes> StoreService::handle(ConnId conn, Op op, const uint8_t* payload, std::size_t n) {
  proto::Reader in(payload, n);
  try {
    return dispatch(conn, op, in);
  } catch (const Error& e) {
    // The caller's mistake, reported back to it; the connection stays usable.
    return error_frame(e.what());
  }
}

std::optional<Bytes> StoreService::dispatch(ConnId conn, Op op, proto::Reader& in) {
  switch (op) {
    case Op::kSet: {
      std::string key = in.str();
      Bytes value = in.bytes();
      in.expect_done();
      check_value(key, value);
      set_key(key, std::move(value));
      return ok_frame();
    }
    case Op::kGet: {
      std::string key = in.str();
      in.expect_done();
      check_key(key);
      return get_or_park(conn, op, {key});
    }
    case Op::kAdd: {
      std::string key = in.str();
      int64_t delta = in.i64();
      in.expect_done();
      check_key(key);
      int64_t v = table_.add(key, delta);
      wake(key);
      return ok_frame(proto::Writer().i64(v));
    }
    case Op::kCompareSet: {
      std::string key = in.str();
      Bytes expected = in.bytes();
      Bytes desired = in.bytes();
      in.expect_done();
      check_value(key, desired);
      bool existed = table_.contains(key);
      Bytes after = table_.compare_set(key, expected, desired);
      if (!existed && table_.contains(key)) wake(key);
      return ok_frame(proto::Writer().bytes(after));
    }
    case Op::kCheck: {
      auto keys = in.keys();
      in.expect_done();
      return ok_frame(proto::Writer().u8(table_.contains_all(keys) ? 1 : 0));
    }
    case Op::kWait:
    case Op::kMultiGet: {
      auto keys = in.keys();
      in.expect_done();
      for (const auto& k : keys) check_key(k);
      return get_or_park(conn, op, std::move(keys));
    }
    case Op::kDelete: {
      std::string key = in.str();
      in.expect_done();
      return ok_frame(proto::Writer().u8(table_.erase(key) ? 1 : 0));
    }
    case Op::kNumKeys:
      in.expect_done();
      return ok_frame(proto::Writer().i64(table_.size()));
    case Op::kMultiSet: {
      uint32_t count = in.u32();
      std::vector<std::pair<std::string, Bytes>> kvs;
      for (uint32_t i = 0; i < count; ++i) {
        std::string key = in.str();
        Bytes value = in.bytes();
        check_value(key, value);
        kvs.emplace_back(std::move(key), std::move(value));
      }
      in.expect_done();
      // Validated in full first, so a bad pair sets none of them.
      for (auto& [k, v] : kvs) set_key(k, std::move(v));
      return ok_frame();
    }
    case Op::kHello: break;
  }
  throw proto::ProtocolError{fmt::format("opcode {} is not valid here", static_cast<int>(op))};
}

std::optional<Bytes> StoreService::get_or_park(ConnId conn, Op op, std::vector<std::string> keys) {
  const std::string* missing = table_.first_missing(keys);
  if (missing == nullptr) return answer(op, keys);
  std::string first_missing = *missing;
  uint64_t seq = ++next_seq_;
  waiters_[first_missing].push_back({conn, seq});
  parked_[conn] = Parked{op, std::move(keys), seq, std::move(first_missing)};
  return std::nullopt;
}

void StoreService::forget(ConnId conn) {
  auto p = parked_.find(conn);
  if (p == parked_.end()) return;
  auto it = waiters_.find(p->second.waiting_on);
  if (it != waiters_.end()) {
    std::erase_if(it->second, [&](const Waiter& w) { return w.conn == conn; });
    if (it->second.empty()) waiters_.erase(it);
  }
  parked_.erase(p);
}

Bytes StoreService::answer(Op op, const std::vector<std::string>& keys) const {
  proto::Writer w;
  if (op == Op::kGet) {
    w.bytes(*table_.find(keys[0]));
  } else if (op == Op::kMultiGet) {
    w.u32(static_cast<uint32_t>(keys.size()));
    for (const auto& k : keys) w.bytes(*table_.find(k));
  }
  return ok_frame(w);
}

void StoreService::set_key(const std::string& key, Bytes value) {
  table_.set(key, std::move(value));
  wake(key);
}

void StoreService::wake(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<Waiter> waiting = std::move(it->second);
  waiters_.erase(it);
  for (const Waiter& w : waiting) {
    auto p = parked_.find(w.conn);
    if (p == parked_.end() || p->second.seq != w.seq) continue;  // gone, or a later request of that client
    const std::string* missing = table_.first_missing(p->second.keys);
    if (missing != nullptr) {
      waiters_[*missing].push_back(w);
      p->second.waiting_on = *missing;
      continue;
    }
    completed_.emplace_back(w.conn, answer(p->second.op, p->second.keys));
    parked_.erase(p);
  }
}

void StoreService::check_key(const std::string& key) const {
  if (key.size() > max_key_bytes_) {
    throw InvalidUsageError(fmt::format("key of {} is longer than this store's limit of {} (max_key_bytes)",
                                        format_bytes(key.size()), format_bytes(max_key_bytes_)));
  }
}

void StoreService::check_value(const std::string& key, const Bytes& value) const {
  check_key(key);
  if (value.size() > max_value_bytes_) {
    throw InvalidUsageError(fmt::format("value of {} for key '{}' is larger than this store's limit of {} "
                                        "(max_value_bytes)",
                                        format_bytes(value.size()), key.substr(0, 200), format_bytes(max_value_bytes_)));
  }
}

}  // namespace dcomm::rdzv
