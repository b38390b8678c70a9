// Point-to-point through the public API in real processes over shm (tests/runtime/p2p_checks.hpp), where small
// sends are handed over on the spot. Each rank prints what went wrong; exit 0 only when nothing did.
//   dcomm-run --nproc-per-node 3 -- mp_p2p

#include "tests/runtime/mp_checks.hpp"
#include "tests/runtime/p2p_checks.hpp"

int main() {
  return dcomm::test::run_checks_main("point-to-point",
                                      {dcomm::test::check_p2p_sizes_in_order, dcomm::test::check_p2p_ping_pong});
}
