#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

namespace dcomm {

std::vector<Store::Bytes> Store::multi_get(const std::vector<std::string>& keys) {
  std::vector<Bytes> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(get(k));
  return out;
}

void Store::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) {
    throw InvalidUsageError("Store::multi_set: " + std::to_string(keys.size()) + " keys but " +
                            std::to_string(values.size()) + " values");
  }
  for (std::size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

}  // namespace dcomm
