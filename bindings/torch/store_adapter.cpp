#include "store_adapter.hpp"

#include <dcomm/error.hpp>

#include <fmt/format.h>

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
    Bytes out;
    call("get", key, [&] { out = store_->get(key); }, {key});
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
  void wait(const std::vector<std::string>& keys, dcomm::Duration timeout) override {
    if (timeout == dcomm::kDefaultTimeout) {
      call("wait", join(keys), [&] { store_->wait(keys); }, keys);
    } else {
      call("wait", join(keys), [&] { store_->wait(keys, timeout); }, keys);
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
  // Runs one store call. A failure of a call that waits for `waited` keys is a timeout when those keys are still
  // missing afterwards; anything else is the store failing.
  template <typename F>
  void call(const char* op, const std::string& what, F&& f, const std::vector<std::string>& waited = {}) {
    try {
      f();
    } catch (const std::exception& e) {
      std::string msg = fmt::format("{} {} on {} failed: {}", op, what, describe_, e.what());
      bool missing = false;
      if (!waited.empty()) {
        try {
          missing = !store_->check(waited);
        } catch (const std::exception&) {
          missing = false;
        }
      }
      if (missing) throw dcomm::TimeoutError(msg + " (the keys were not set within the store's timeout)");
      throw dcomm::RemoteError(msg + "; check that the process hosting torch's store (rank 0) is alive");
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
