// Calls invalid on one rank only, as threads (the same cases as mp_invalid_calls, over loopback): every rank
// fails the same call naming the bad rank, and the next call is right. With the call check off, the bad rank
// fails alone and the others time out on that call: no rank pairs it with a later call.

#include <catch2/catch.hpp>

#include "tests/runtime/invalid_calls.hpp"
#include "tests/runtime/ranks.hpp"

using namespace dcomm;

namespace {

std::string first(const std::vector<std::string>& f) { return f.empty() ? "" : f.front(); }

}  // namespace

TEST_CASE("a call invalid on one rank fails on every rank, naming it, and the group stays in step",
          "[runtime][invalid]") {
  for (int size : {2, 3, 5}) {
    for (bool async_op : {false, true}) {
      auto failures = test::run_ranks(size, [&](ProcessGroup& pg, std::vector<std::string>& f) {
        test::check_invalid_calls(pg, f, {.async_op = async_op});
      });
      INFO("size " << size << (async_op ? " async" : "") << ": " << failures.size() << " failures; " << first(failures));
      CHECK(failures.empty());
    }
  }
}

TEST_CASE("counts whose bytes overflow raise InvalidUsageError on every rank", "[runtime][invalid]") {
  auto failures = test::run_ranks(3, [](ProcessGroup& pg, std::vector<std::string>& f) {
    test::check_overflowing_counts(pg, f);
  });
  INFO(first(failures));
  CHECK(failures.empty());
}
