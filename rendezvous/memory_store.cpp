// The in-process store: one mutex and one condition variable around a KvTable. For threads-as-ranks tests and
// for a single process that needs no TCP.

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "common/deadline.hpp"
#include "rendezvous/kv_table.hpp"
#include "rendezvous/store_errors.hpp"

#include <condition_variable>
#include <mutex>

namespace dcomm {
namespace {

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(Duration timeout) : timeout_(timeout) {}

  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      table_.set(key, value);
    }
    cv_.notify_all();
  }

  Bytes get(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mu_);
    wait_locked(lock, "get", {key}, kDefaultTimeout);
    return *table_.find(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t v;
    {
      std::lock_guard<std::mutex> lock(mu_);
      v = table_.add(key, delta);
    }
    cv_.notify_all();
    return v;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes v;
    {
      std::lock_guard<std::mutex> lock(mu_);
      v = table_.compare_set(key, expected, desired);
    }
    cv_.notify_all();
    return v;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.contains_all(keys);
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    wait_locked(lock, "wait", keys, timeout);
  }

  bool delete_key(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.erase(key);
  }

  int64_t num_keys() override {
    std::lock_guard<std::mutex> lock(mu_);
    return table_.size();
  }

  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override {
    std::unique_lock<std::mutex> lock(mu_);
    wait_locked(lock, "multi_get", keys, kDefaultTimeout);
    std::vector<Bytes> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(*table_.find(k));
    return out;
  }

  Duration timeout() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return timeout_;
  }
  void set_timeout(Duration timeout) override {
    rdzv::check_timeout_arg("set_timeout", timeout);
    std::lock_guard<std::mutex> lock(mu_);
    timeout_ = rdzv::effective_timeout(timeout, timeout_);
  }
  std::string describe() const override { return "memory"; }

 private:
  // Waits on the condition variable until every key exists or the deadline passes.
  void wait_locked(std::unique_lock<std::mutex>& lock, const char* op, const std::vector<std::string>& keys,
                   Duration timeout) {
    rdzv::check_timeout_arg(op, timeout);
    Deadline deadline = Deadline::after(rdzv::effective_timeout(timeout, timeout_));
    while (!table_.contains_all(keys)) {
      if (deadline.at() == Clock::time_point::max()) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout && !table_.contains_all(keys)) {
        std::vector<std::string> missing;
        for (const auto& k : keys) {
          if (!table_.contains(k)) missing.push_back(k);
        }
        rdzv::throw_store_timeout(op, keys, missing, describe(), deadline.elapsed(), deadline.timeout());
      }
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  rdzv::KvTable table_;
  Duration timeout_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store(Duration timeout) {
  rdzv::check_timeout_arg("make_memory_store", timeout);
  return std::make_shared<MemoryStore>(timeout == kDefaultTimeout ? std::chrono::seconds(300) : timeout);
}

}  // namespace dcomm
