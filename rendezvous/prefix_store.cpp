// A view of another store under a key prefix: groups and restart rounds share one server without colliding.

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include <fmt/format.h>

namespace dcomm {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner) : prefix_(std::move(prefix)), inner_(std::move(inner)) {}

  void set(const std::string& key, const Bytes& value) override { inner_->set(k(key), value); }
  Bytes get(const std::string& key) override { return inner_->get(k(key)); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(k(key), delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(k(key), expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(ks(keys)); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override { inner_->wait(ks(keys), timeout); }
  bool delete_key(const std::string& key) override { return inner_->delete_key(k(key)); }
  /// The inner store's count: keys are not indexed by prefix, so this counts every user's keys.
  int64_t num_keys() override { return inner_->num_keys(); }
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override { return inner_->multi_get(ks(keys)); }
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    inner_->multi_set(ks(keys), values);
  }

  Duration timeout() const override { return inner_->timeout(); }
  void set_timeout(Duration timeout) override { inner_->set_timeout(timeout); }
  std::string describe() const override { return fmt::format("prefix '{}' of {}", prefix_, inner_->describe()); }

 private:
  std::string k(const std::string& key) const { return prefix_ + key; }
  std::vector<std::string> ks(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& key : keys) out.push_back(k(key));
    return out;
  }

  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> inner) {
  if (!inner) throw InvalidUsageError(fmt::format("make_prefix_store('{}'): the inner store is null", prefix));
  return std::make_shared<PrefixStore>(std::move(prefix), std::move(inner));
}

}  // namespace dcomm
