#pragma once
// Reading configuration from the environment, with errors that name the variable and the bad value.

#include <optional>
#include <string>

namespace dcomm::env {

std::optional<std::string> get(const char* name);
/// The first of several names that is set (e.g. DCOMM_RANK, then RANK).
std::optional<std::string> first(std::initializer_list<const char*> names, const char** which = nullptr);
/// An integer variable; throws InvalidUsageError naming the variable when it is set but not an integer.
std::optional<long long> get_int(const char* name);
long long get_int(const char* name, long long fallback);
double get_double(const char* name, double fallback);
bool get_bool(const char* name, bool fallback);

}  // namespace dcomm::env
