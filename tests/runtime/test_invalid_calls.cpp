// Calls invalid on one rank only, as threads (the same cases as mp_invalid_calls, over loopback): every rank
// fails the same call naming the bad rank, and the next call is right. With the call check off, the bad rank
// fails alone and the others time out on that call: no rank pairs it with a later call.

#include <catch2/catch.hpp>
#include <cstdlib>

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

TEST_CASE("with the call check off, a call invalid on one rank fails there at once and times out elsewhere",
          "[runtime][invalid]") {
  // The documented guarantee of DCOMM_CHECK_CALLS=0: the other ranks are not told, but the bad call uses its
  // number on the bad rank too, so no rank pairs it with a later call: the others' call ends by its timeout, and
  // the bad rank's next call cannot complete with the others' data.
  setenv("DCOMM_CHECK_CALLS", "0", 1);
  auto failures = test::run_ranks(3, [](ProcessGroup& pg, std::vector<std::string>& f) {
    std::vector<double> x(5), next(5);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = test::value_of(pg.rank(), i), next[i] = 2 * x[i];
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(1500);
    o.algorithm = "ring";
    try {
      pg.all_reduce(pg.rank() == 1 ? Buffer(nullptr, 5, DType::kFloat64) : Buffer(x), Buffer(x), ReduceOp::kSum, o);
      f.push_back("the bad call returned success");
    } catch (const InvalidUsageError& e) {
      const std::string w = e.what();
      RANK_EXPECT(f, pg.rank() == 1 && w.find("DCOMM_CHECK_CALLS=0") != std::string::npos, "bad rank alone: " + w);
    } catch (const TimeoutError& e) {
      RANK_EXPECT(f, pg.rank() != 1, std::string("the bad rank timed out: ") + e.what());
    }
    if (pg.rank() != 1) return;  // the others' group is poisoned by their timeout
    try {
      pg.all_reduce(Buffer(next), ReduceOp::kSum, o);
      f.push_back("the bad rank's next call paired with the others' bad call, giving " + std::to_string(next[0]));
    } catch (const Error&) {
    }
  });
  unsetenv("DCOMM_CHECK_CALLS");
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("with the call check off, a broadcast whose counts differ through the slots fails on the reader, naming "
          "the root's bytes", "[runtime][invalid]") {
  // The reader takes the root's slot without comparing calls (there is no call to compare), so the sizes are what
  // tell: the root published 3 doubles where 5 were expected (SlotChannel::checked_data). Never 5 doubles copied
  // from a slot that holds 3.
  setenv("DCOMM_CHECK_CALLS", "0", 1);
  auto failures = test::run_ranks(2, [](ProcessGroup& pg, std::vector<std::string>& f) {
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(3000);
    std::vector<double> x(pg.rank() == 0 ? 3 : 5);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = test::value_of(pg.rank(), i);
    for (int call = 0; call < 3; ++call) {  // the first calls of a shape, and its repeats (the engine's direct way)
      try {
        pg.broadcast(Buffer(x), 0, o);
        RANK_EXPECT(f, pg.rank() == 0, "the reader returned from call " + std::to_string(call) + " with x[4] = " +
                                           std::to_string(x[4]));
      } catch (const InvalidUsageError& e) {
        const std::string w = e.what();
        RANK_EXPECT(f, pg.rank() == 1 && w.find("rank 0 published 24 B") != std::string::npos &&
                           w.find("where 40 B were expected") != std::string::npos,
                    "the reader names the root's bytes: " + w);
      } catch (const Error& e) {
        f.push_back(std::string("raised another error: ") + e.what());
        return;
      }
    }
  });
  unsetenv("DCOMM_CHECK_CALLS");
  INFO(first(failures));
  CHECK(failures.empty());
}
