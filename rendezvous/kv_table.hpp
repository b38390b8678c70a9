#pragma once
// The key-value semantics every store shares (the memory store under its mutex, the TCP server on its loop
// thread), so that add() and compare_set() behave identically whichever store a test or a job uses.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dcomm::rdzv {

class KvTable {
 public:
  using Bytes = std::vector<uint8_t>;

  void set(const std::string& key, Bytes value) { map_[key] = std::move(value); }
  /// The value, or nullptr when the key is missing. Valid until the next change.
  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  /// Counters are stored as decimal ASCII ("42"), as c10d does, so get() on a counter reads naturally.
  /// Throws InvalidUsageError when the key holds something that is not a decimal integer.
  int64_t add(const std::string& key, int64_t delta);
  /// Sets desired when the value equals expected, or when the key is missing and expected is empty.
  /// Returns the value afterwards (empty when the key stays missing).
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool contains_all(const std::vector<std::string>& keys) const;
  /// The first key of keys that is missing, or nullptr when all exist.
  const std::string* first_missing(const std::vector<std::string>& keys) const;
  bool erase(const std::string& key) { return map_.erase(key) != 0; }
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace dcomm::rdzv
