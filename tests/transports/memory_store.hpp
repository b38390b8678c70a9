#pragma once
// A store in this process's memory for the threads-as-ranks transport tests (the rendezvous layer's
// make_memory_store replaces it once that layer lands).

#include <condition_variable>
#include <map>
#include <mutex>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

namespace dcomm::test {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
    cv_.notify_all();
  }
  Bytes get(const std::string& key) override {
    wait({key}, timeout_);
    std::lock_guard<std::mutex> lock(mu_);
    return kv_.at(key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = kv_[key];
    int64_t n = (v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()))) + delta;
    std::string s = std::to_string(n);
    v.assign(s.begin(), s.end());
    cv_.notify_all();
    return n;
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kv_.find(key);
    if ((it == kv_.end() && expected.empty()) || (it != kv_.end() && it->second == expected)) {
      kv_[key] = desired;
      cv_.notify_all();
      return desired;
    }
    return it == kv_.end() ? Bytes{} : it->second;
  }
  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    return has_all(keys);
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    if (timeout == kDefaultTimeout) timeout = timeout_;
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return has_all(keys); })) {
      throw TimeoutError("memory store: keys not set in time, first: " + keys.front());
    }
  }
  bool delete_key(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_.erase(key) != 0;
  }
  int64_t num_keys() override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(kv_.size());
  }
  Duration timeout() const override { return timeout_; }
  void set_timeout(Duration timeout) override { timeout_ = timeout; }
  std::string describe() const override { return "memory"; }
  using Store::set;

 private:
  bool has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (kv_.count(k) == 0) return false;
    }
    return true;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> kv_;
  Duration timeout_ = std::chrono::seconds(30);
};

}  // namespace dcomm::test
