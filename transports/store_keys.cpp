#include "transports/store_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dcomm/error.hpp>

namespace dcomm::transport {
namespace {

class PrefixedStore final : public Store {
 public:
  PrefixedStore(Store& inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const Bytes& value) override { inner_.set(prefix_ + key, value); }
  Bytes get(const std::string& key) override { return inner_.get(prefix_ + key); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(prefix_ + key, delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_.compare_set(prefix_ + key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_.check(with_prefix(keys)); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    inner_.wait(with_prefix(keys), timeout);
  }
  bool delete_key(const std::string& key) override { return inner_.delete_key(prefix_ + key); }
  int64_t num_keys() override { return inner_.num_keys(); }
  Duration timeout() const override { return inner_.timeout(); }
  void set_timeout(Duration timeout) override { inner_.set_timeout(timeout); }
  std::string describe() const override { return fmt::format("prefix '{}' of {}", prefix_, inner_.describe()); }
  using Store::set;

 private:
  std::vector<std::string> with_prefix(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  Store& inner_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> prefixed_store(Store& inner, std::string prefix) {
  return std::make_unique<PrefixedStore>(inner, std::move(prefix));
}

std::string rank_key(const std::string& key, int rank) { return fmt::format("{}/{}", key, rank); }

void wait_for_ranks(Store& store, const std::string& key, int world_size, const Deadline& deadline,
                    const std::string& what, const std::string& step) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(rank_key(key, r));
  try {
    store.wait(keys, deadline.remaining());
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < world_size; ++r) {
      if (!store.check({keys[static_cast<std::size_t>(r)]})) missing.push_back(r);
    }
    throw TimeoutError(fmt::format(
        "{}: rank(s) {} did not {} within {} (timeout {}); check that they started, reach the store ({}) and "
        "did not fail earlier - see their logs",
        what, fmt::join(missing, ", "), step, format_duration(deadline.elapsed()),
        format_duration(deadline.timeout()), store.describe()));
  }
}

}  // namespace dcomm::transport
