// Rooted small calls through the shared-memory slots in real processes (tests/runtime/rooted_calls.hpp): eager
// return, flow control against a slow reader, mismatches. Each rank prints what went wrong; exit 0 only when
// nothing did.
//   dcomm-run --nproc-per-node 3 -- mp_rooted_calls

#include "tests/runtime/mp_checks.hpp"
#include "tests/runtime/rooted_calls.hpp"

int main() {
  return dcomm::test::run_checks_main("rooted calls", {dcomm::test::check_rooted_eager, dcomm::test::check_rooted_flow,
                                                        dcomm::test::check_rooted_mismatch, dcomm::test::check_rooted_mismatch_later});
}
