// Rooted small calls through the shared-memory slots in real processes (tests/runtime/rooted_calls.hpp): eager
// return, flow control against a slow reader, mismatches. Each rank prints what went wrong; exit 0 only when
// nothing did.
//   dcomm-run --nproc-per-node 3 -- mp_rooted_calls

#include <cstdio>

#include "tests/runtime/rooted_calls.hpp"

int main() {
  try {
    auto pg = dcomm::init();
    std::vector<std::string> failures;
    dcomm::test::check_rooted_eager(*pg, failures);
    dcomm::test::check_rooted_flow(*pg, failures);
    dcomm::test::check_rooted_mismatch(*pg, failures);
    pg->barrier();
    std::printf("rank %d/%d: rooted calls, %zu failures\n", pg->rank(), pg->size(), failures.size());
    for (std::size_t i = 0; i < failures.size() && i < 12; ++i) std::printf("  %s\n", failures[i].c_str());
    return failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_rooted_calls: %s\n", e.what());
    return 2;
  }
}
