// Calls invalid on one rank only, in real processes (tests/runtime/invalid_calls.hpp): every bad call at every
// position of the bad rank, blocking and async, on the world and on a subgroup that leaves rank 0 out, and under
// every all_reduce algorithm; then counts whose bytes overflow on every rank. Each rank prints what went wrong; exit 0 only when nothing did.
//   dcomm-run --nproc-per-node 3 -- mp_invalid_calls [only the bad calls whose name holds this]

#include <cstdio>

#include "tests/runtime/group_algorithms.hpp"
#include "tests/runtime/invalid_calls.hpp"

int main(int argc, char** argv) {
  try {
    auto pg = dcomm::init();
    std::vector<std::string> failures;
    const std::string only = argc > 1 ? argv[1] : "";
    int tried = dcomm::test::check_invalid_calls(*pg, failures, {.only = only});
    tried += dcomm::test::check_invalid_calls(*pg, failures, {.async_op = true, .only = only});
    if (pg->size() >= 3) {
      std::vector<int> members;
      for (int r = 1; r < pg->size(); ++r) members.push_back(r);
      auto sub = pg->new_group(members);
      if (sub) tried += dcomm::test::check_invalid_calls(*sub, failures, {.only = only});
    }
    // Every all_reduce algorithm, riding on the check or not (shm_direct's check is its first barrier).
    for (const std::string& algo : dcomm::test::algorithms_for_group(*pg, dcomm::Collective::kAllReduce)) {
      tried += dcomm::test::check_invalid_calls(*pg, failures, {.only = "all_reduce with a null", .algorithm = algo});
    }
    if (only.empty()) dcomm::test::check_overflowing_counts(*pg, failures);
    pg->barrier();
    std::printf("rank %d/%d: %d invalid calls tried, %zu failures\n", pg->rank(), pg->size(), tried, failures.size());
    for (std::size_t i = 0; i < failures.size() && i < 12; ++i) std::printf("  %s\n", failures[i].c_str());
    return failures.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mp_invalid_calls: %s\n", e.what());
    return 2;
  }
}
