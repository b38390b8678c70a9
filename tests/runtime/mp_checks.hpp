#pragma once
// The main of a process test made of check functions through the public API (each appends one line per problem):
// runs them in order on the world's group, then a barrier; each rank prints "rank r/p: <what>, N failures" and the
// first 12. Exit 0 only when no check failed, 2 when one threw.

#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace dcomm::test {

using Check = void (*)(ProcessGroup& pg, std::vector<std::string>& failures);

inline int run_checks_main(const char* what, std::initializer_list<Check> checks) {
  try {
    auto pg = dcomm::init();
    std::vector<std::string> failures;
    for (Check check : checks) check(*pg, failures);
    pg->barrier();
    std::printf("rank %d/%d: %s, %zu failures\n", pg->rank(), pg->size(), what, failures.size());
    for (std::size_t i = 0; i < failures.size() && i < 12; ++i) std::printf("  %s\n", failures[i].c_str());
    return failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what());
    return 2;
  }
}

}  // namespace dcomm::test
