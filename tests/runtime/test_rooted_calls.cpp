// Rooted small calls through the shared-memory slots, as threads (rooted_calls.hpp; mp_rooted_calls runs the same
// checks as processes), and a root that stops taking part: its senders run one call ahead, then wait for it until
// their call's timeout, naming it.

#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/runtime/ranks.hpp"
#include "tests/runtime/rooted_calls.hpp"

using namespace dcomm;
using Clock = std::chrono::steady_clock;

namespace {

std::string first(const std::vector<std::string>& f) { return f.empty() ? "" : f.front(); }

}  // namespace

TEST_CASE("rooted slot calls: the side that only sends returns before its readers call; results right",
          "[runtime][slots][rooted]") {
  for (int size : {2, 3, 5}) {
    auto failures = test::run_ranks(size, test::check_rooted_eager);
    INFO("size " << size << ": " << failures.size() << " failures; " << first(failures));
    CHECK(failures.empty());
  }
}

TEST_CASE("rooted slot calls: senders run at most one call ahead of a slow reader; every result right",
          "[runtime][slots][rooted]") {
  for (int size : {2, 3}) {
    auto failures = test::run_ranks(size, test::check_rooted_flow);
    INFO("size " << size << ": " << failures.size() << " failures; " << first(failures));
    CHECK(failures.empty());
  }
}

TEST_CASE("rooted slot calls that differ: never another call's data, every rank names the odd rank, then in step",
          "[runtime][slots][rooted]") {
  for (int size : {2, 3, 5}) {
    auto failures = test::run_ranks(size, test::check_rooted_mismatch);
    INFO("size " << size << ": " << failures.size() << " failures; " << first(failures));
    CHECK(failures.empty());
  }
}

TEST_CASE("a root that stops calling: its senders return one call ahead, then time out naming it",
          "[runtime][slots][rooted]") {
  constexpr int kRoot = 2;
  std::atomic<int> finished{0};
  const auto t0 = Clock::now();
  auto failures = test::run_ranks(3, [&](ProcessGroup& pg, std::vector<std::string>& f) {
    std::vector<double> x(4), y(4);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = test::value_of(pg.rank(), i);
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(1500);
    pg.reduce(Buffer(x), Buffer(y), kRoot, ReduceOp::kSum, o)->wait();
    if (pg.rank() == kRoot) {  // alive, its transport open, but never makes another call
      while (finished.load() < 2 && Clock::now() - t0 < std::chrono::seconds(60)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    struct Done {
      std::atomic<int>& n;
      ~Done() { n.fetch_add(1); }
    } done{finished};
    // The root made the first call: the second is published and returns (the pending check of the first sees
    // every rank's call); the third waits for the root's part of the second, which never comes.
    try {
      pg.reduce(Buffer(x), Buffer(y), kRoot, ReduceOp::kSum, o)->wait();
    } catch (const Error& e) {
      f.push_back(std::string("the second reduce did not return at once: ") + e.what());
      return;
    }
    try {
      pg.reduce(Buffer(x), Buffer(y), kRoot, ReduceOp::kSum, o)->wait();
      f.push_back("the third reduce returned although the root never made the second");
    } catch (const TimeoutError& e) {
      const std::string w = e.what();
      for (const std::string& want : {fmt::format("shared-memory slot of rank {}", kRoot), std::string("timeout 1.5 s")}) {
        if (w.find(want) == std::string::npos) f.push_back("the timeout lacks '" + want + "': " + w);
      }
    } catch (const Error& e) {
      f.push_back(std::string("the third reduce raised something other than a timeout: ") + e.what());
    }
  });
  INFO(first(failures));
  CHECK(failures.empty());
  CHECK(Clock::now() - t0 < std::chrono::seconds(40));
}
