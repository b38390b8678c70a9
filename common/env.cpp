#include "common/env.hpp"

#include <dcomm/error.hpp>

#include <cerrno>
#include <cstdlib>

namespace dcomm::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> first(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    if (auto v = get(n)) {
      if (which != nullptr) *which = n;
      return v;
    }
  }
  return std::nullopt;
}

std::optional<long long> get_int(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || errno != 0 || *end != '\0') {
    throw InvalidUsageError(std::string("environment variable ") + name + "='" + *v + "' is not an integer");
  }
  return x;
}

long long get_int(const char* name, long long fallback) { return get_int(name).value_or(fallback); }

double get_double(const char* name, double fallback) {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') {
    throw InvalidUsageError(std::string("environment variable ") + name + "='" + *v + "' is not a number");
  }
  return x;
}

bool get_bool(const char* name, bool fallback) {
  auto v = get(name);
  if (!v) return fallback;
  if (*v == "1" || *v == "true" || *v == "yes" || *v == "on") return true;
  if (*v == "0" || *v == "false" || *v == "no" || *v == "off" || v->empty()) return false;
  throw InvalidUsageError(std::string("environment variable ") + name + "='" + *v + "' is not a boolean (use 0 or 1)");
}

}  // namespace dcomm::env
