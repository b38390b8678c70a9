#include "tools/bench/exchange.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <string>

#include "tools/bench/row.hpp"

namespace dcomm::bench {

Exchange::Exchange(std::shared_ptr<Store> store, int rank, int world, Duration timeout)
    : store_(std::move(store)), rank_(rank), world_(world), timeout_(timeout) {}

std::string Exchange::key(const char* kind, uint64_t seq, int rank) const {
  return rank < 0 ? fmt::format("{}/{}", kind, seq) : fmt::format("{}/{}/{}", kind, seq, rank);
}

void Exchange::arrive(uint64_t seq) { store_->set(key("a", seq, rank_), std::string("1")); }

std::vector<int> Exchange::missing(uint64_t seq) {
  std::vector<int> out;
  for (int r = 0; r < world_; ++r) {
    if (!store_->check({key("a", seq, r)})) out.push_back(r);
  }
  return out;
}

void Exchange::publish(uint64_t seq, const LocalResult& r) { store_->set(key("r", seq, rank_), encode(r)); }

std::vector<LocalResult> Exchange::collect(uint64_t seq) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_; ++r) keys.push_back(key("r", seq, r));
  store_->wait(keys, timeout_);
  std::vector<LocalResult> out;
  for (const Store::Bytes& b : store_->multi_get(keys)) out.push_back(decode(b));
  // Later cases only need the store to stay small; the keys of a finished case are never read again.
  for (int r = 0; r < world_; ++r) {
    store_->delete_key(key("r", seq, r));
    store_->delete_key(key("a", seq, r));
  }
  return out;
}

void Exchange::mark_failed(uint64_t seq, int rank) { store_->set(key("fail", seq, -1), std::to_string(rank)); }

bool Exchange::wait_failed(uint64_t seq, Duration timeout) {
  try {
    store_->wait({key("fail", seq, -1)}, timeout);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

}  // namespace dcomm::bench
