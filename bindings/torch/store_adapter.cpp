#include "store_adapter.hpp"

#include <dcomm/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace dcomm_torch {
namespace {

std::string join(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

// torch's stores throw c10::Error for everything; dcomm's rendezvous tells a timeout (TimeoutError, which it
// explains with the ranks still missing) from a broken store (RemoteError). torch's TCPStore and FileStore lock
// each call themselves.
class TorchStore final : public dcomm::Store {
 public:
  TorchStore(c10::intrusive_ptr<c10d::Store> store, std::string describe)
      : store_(std::move(store)), describe_(std::move(describe)) {}

  void set(const std::string& key, const Bytes& value) override {
    call("set", key, [&] { store_->set(key, value); });
  }
  Bytes get(const std::string& key) override {
    // A get of a key not set yet waits in the server like wait() does, and would break the connection alike when it
    // timed out (below): the key is waited for first.
    wait({key}, dcomm::kDefaultTimeout);
    Bytes out;
    call("get", key, [&] { out = store_->get(key); });
    return out;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t out = 0;
    call("add", key, [&] { out = store_->add(key, delta); });
    return out;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes out;
    call("compare_set", key, [&] { out = store_->compareSet(key, expected, desired); });
    return out;
  }
  bool check(const std::vector<std::string>& keys) override {
    bool out = false;
    call("check", join(keys), [&] { out = store_->check(keys); });
    return out;
  }
  // A bounded wait polls check(), never torch's own timed wait: torch 1.13's TCPStore client cannot recover from a
  // wait that timed out - the server still answers it once the keys are set, and when that happens while the client
  // is not waiting, the answer is read as the reply to the client's next call, which then hangs until the store's
  // timeout. dcomm's rendezvous waits in slices of 200 ms to watch for failed ranks, so a rank that joined late
  // left the others stuck now and then (CI: "rank(s) 1 did not publish their peer info within 120 s"). check()
  // leaves nothing pending in the server. From 50 us between polls, doubling to 10 ms.
  void wait(const std::vector<std::string>& keys, dcomm::Duration timeout) override {
    using Clock = std::chrono::steady_clock;
    const dcomm::Duration limit = timeout == dcomm::kDefaultTimeout ? dcomm::Duration(store_->getTimeout()) : timeout;
    const Clock::time_point start = Clock::now();
    const Clock::time_point end = limit == dcomm::kNoTimeout ? Clock::time_point::max() : start + limit;
    Clock::duration pause = std::chrono::microseconds(50);
    for (;;) {
      bool set = false;
      call("wait", join(keys), [&] { set = store_->check(keys); });
      if (set) return;
      const Clock::time_point now = Clock::now();
      if (now >= end) {
        throw dcomm::TimeoutError(fmt::format("wait {} on {} failed: not set after {} ms (timeout {} ms)", join(keys),
                                              describe_,
                                              std::chrono::duration_cast<dcomm::Duration>(now - start).count(),
                                              limit.count()));
      }
      std::this_thread::sleep_for(std::min(pause, end - now));
      pause = std::min<Clock::duration>(pause * 2, std::chrono::milliseconds(10));
    }
  }
  bool delete_key(const std::string& key) override {
    bool out = false;
    call("delete_key", key, [&] { out = store_->deleteKey(key); });
    return out;
  }
  int64_t num_keys() override {
    int64_t out = 0;
    call("num_keys", "", [&] { out = store_->getNumKeys(); });
    return out;
  }
  dcomm::Duration timeout() const override { return store_->getTimeout(); }
  void set_timeout(dcomm::Duration timeout) override { store_->setTimeout(timeout); }
  std::string describe() const override { return describe_; }

 private:
  // Runs one store call; a failure is the store failing (no call here waits in the server: wait() polls).
  template <typename F>
  void call(const char* op, const std::string& what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw dcomm::RemoteError(fmt::format("{} {} on {} failed: {}; check that the process hosting torch's store "
                                           "(rank 0) is alive",
                                           op, what, describe_, e.what()));
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string describe_;
};

}  // namespace

std::shared_ptr<dcomm::Store> adapt_store(c10::intrusive_ptr<c10d::Store> store, std::string describe) {
  return std::make_shared<TorchStore>(std::move(store), std::move(describe));
}

}  // namespace dcomm_torch
