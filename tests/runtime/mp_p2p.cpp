// Point-to-point through the public API in real processes over shm (tests/runtime/p2p_checks.hpp), where small
// sends are handed over on the spot. Each rank prints what went wrong; exit 0 only when nothing did.
//   dcomm-run --nproc-per-node 3 -- mp_p2p

#include <cstdio>

#include "tests/runtime/p2p_checks.hpp"

int main() {
  try {
    auto pg = dcomm::init();
    std::vector<std::string> failures;
    dcomm::test::check_p2p_sizes_in_order(*pg, failures);
    dcomm::test::check_p2p_ping_pong(*pg, failures);
    pg->barrier();
    std::printf("rank %d/%d: point-to-point, %zu failures\n", pg->rank(), pg->size(), failures.size());
    for (std::size_t i = 0; i < failures.size() && i < 12; ++i) std::printf("  %s\n", failures[i].c_str());
    return failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_p2p: %s\n", e.what());
    return 2;
  }
}
