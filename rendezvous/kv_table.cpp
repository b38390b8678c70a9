#include "rendezvous/kv_table.hpp"

#include <dcomm/error.hpp>

#include <fmt/format.h>

#include <charconv>

namespace dcomm::rdzv {

const KvTable::Bytes* KvTable::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t KvTable::add(const std::string& key, int64_t delta) {
  Bytes& v = map_[key];
  int64_t current = 0;
  if (!v.empty()) {
    const char* first = reinterpret_cast<const char*>(v.data());
    const char* last = first + v.size();
    auto [end, ec] = std::from_chars(first, last, current);
    if (ec != std::errc() || end != last) {
      throw InvalidUsageError(fmt::format("add('{}', {}): the key holds {} bytes that are not a decimal integer; "
                                          "add() only works on counters it created",
                                          key, delta, v.size()));
    }
  }
  int64_t next = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(delta));
  std::string s = std::to_string(next);
  v.assign(s.begin(), s.end());
  return next;
}

KvTable::Bytes KvTable::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return {};
    map_.emplace(key, desired);
    return desired;
  }
  if (it->second == expected) it->second = desired;
  return it->second;
}

bool KvTable::contains_all(const std::vector<std::string>& keys) const { return first_missing(keys) == nullptr; }

const std::string* KvTable::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& k : keys) {
    if (!contains(k)) return &k;
  }
  return nullptr;
}

}  // namespace dcomm::rdzv
