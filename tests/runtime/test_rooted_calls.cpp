// Rooted small calls through the shared-memory slots, as threads (rooted_calls.hpp; mp_rooted_calls runs the same
// checks as processes), and a root that stops taking part: its senders run kCallsAhead calls ahead, then wait
// for it until their call's timeout, naming it.

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "collectives/slots.hpp"
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

TEST_CASE("rooted slot calls: senders run ahead of a slow reader, at most kCallsAhead calls; every result right",
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

TEST_CASE("a root that stops calling: its senders run kCallsAhead calls ahead, then time out naming it",
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
    // The root made the first call: the next kCallsAhead calls are published and return (their checks wait: the
    // root's part never comes); the one after would run more than kCallsAhead calls ahead of the root, and waits
    // for the root's second call, which never comes.
    for (uint64_t k = 2; k <= coll::kCallsAhead + 1; ++k) {
      try {
        pg.reduce(Buffer(x), Buffer(y), kRoot, ReduceOp::kSum, o)->wait();
      } catch (const Error& e) {
        f.push_back(fmt::format("reduce #{} did not return at once: {}", k, e.what()));
        return;
      }
    }
    try {
      pg.reduce(Buffer(x), Buffer(y), kRoot, ReduceOp::kSum, o)->wait();
      f.push_back("a reduce returned more than kCallsAhead calls ahead of the root");
    } catch (const TimeoutError& e) {
      const std::string w = e.what();
      for (const std::string& want : {fmt::format("shared-memory slot of rank {}", kRoot), std::string("timeout 1.5 s")}) {
        if (w.find(want) == std::string::npos) f.push_back("the timeout lacks '" + want + "': " + w);
      }
    } catch (const Error& e) {
      f.push_back(std::string("the blocked reduce raised something other than a timeout: ") + e.what());
    }
  });
  INFO(first(failures));
  CHECK(failures.empty());
  CHECK(Clock::now() - t0 < std::chrono::seconds(40));
}

TEST_CASE("a sender running ahead learns of a mismatch a few calls later; it and its reader fail that same call",
          "[runtime][slots][rooted]") {
  // Broadcasts from rank 0; rank 1 passes another count in call #3 and fails it at once (it reads the root). The
  // root returned from it (it only sends) and runs on: within kSlotDepth - kCallsAhead calls it must learn of the
  // mismatch, fail that call with the late notice, and rank 1 (which reads its part of that call) fails it too;
  // every other call is right, and an all_reduce after is right on both (in step).
  constexpr int kBad = 3;
  constexpr int kCalls = kBad + 1 + static_cast<int>(coll::kSlotDepth);
  std::array<std::atomic<int>, 2> late_at{};
  for (auto& a : late_at) a = -1;
  auto failures = test::run_ranks(2, [&](ProcessGroup& pg, std::vector<std::string>& f) {
    const int r = pg.rank();
    CollectiveOptions o;
    o.timeout = std::chrono::seconds(20);
    for (int k = 0; k < kCalls; ++k) {
      std::vector<double> buf = test::salted_values(r, k == kBad && r == 1 ? 6 : 5, k);
      try {
        pg.broadcast(Buffer(buf), 0, o)->wait();
        if (k == kBad && r == 1) f.push_back("rank 1 returned from the call whose count differs");
        for (std::size_t i = 0; i < 5; ++i) {
          if (buf[i] != test::salted_value(0, i, k)) {
            f.push_back(fmt::format("call {}: element {} is {}, not the root's", k, i, buf[i]));
            break;
          }
        }
      } catch (const InvalidUsageError& e) {
        const std::string w = e.what();
        if (w.find("rank 1 called") == std::string::npos) f.push_back(fmt::format("call {}: {}", k, w));
        if (k == kBad) continue;
        if (w.find("learned only at this call") == std::string::npos || late_at[r] != -1) {
          f.push_back(fmt::format("call {}: not the one late notice: {}", k, w));
        }
        late_at[r] = k;
      }
    }
    std::vector<double> sum = test::salted_values(r, 3, 99);
    pg.all_reduce(Buffer(sum), ReduceOp::kSum)->wait();
    if (sum[1] != test::salted_value(0, 1, 99) + test::salted_value(1, 1, 99)) f.push_back("out of step after");
  });
  INFO(first(failures));
  CHECK(failures.empty());
  // Rank 0 returned from call kBad, so it learned later, and rank 1 failed that same call.
  CHECK(late_at[0] > kBad);
  CHECK(late_at[0] <= kBad + static_cast<int>(coll::kSlotDepth - coll::kCallsAhead));
  CHECK(late_at[1] == late_at[0]);
}

TEST_CASE("rooted slot calls that differ, then only rooted calls that agree: every rank that returned learns of it",
          "[runtime][slots][rooted]") {
  for (int size : {2, 3, 5}) {
    auto failures = test::run_ranks(size, test::check_rooted_mismatch_later);
    INFO("size " << size << ": " << failures.size() << " failures; " << first(failures));
    CHECK(failures.empty());
  }
}
