// The loop trial (collectives/tuner.hpp, LoopTrial): a measured class's choice tried again on the program's own
// calls against the runner-up. Its rows and blocks, its paces, what it keeps; and through an engine, every rank
// running the same row at every call, right results throughout, and explain() saying what was tried.

#include <fmt/format.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <dcomm/error.hpp>
#include <limits>
#include <string>
#include <vector>

#include "collectives/engine.hpp"
#include "collectives/tuner.hpp"
#include "tests/collectives/harness.hpp"
#include "tests/collectives/reference.hpp"

using namespace dcomm;
using namespace dcomm::coll;

namespace {
constexpr uint64_t kTrialCalls = LoopTrial::kBlock * LoopTrial::kBlocks;

// `calls` all_reduce calls of `count` floats whose inputs differ per rank and call, each checked against the serial
// sum; returns the algorithm each ran.
std::vector<std::string> all_reduces(Engine& engine, const GroupView& view, std::size_t count, uint64_t calls,
                                     test::RankRecord& rec) {
  std::vector<std::string> names;
  std::string rows;
  for (uint64_t i = 0; i < calls; ++i) {
    std::vector<test::Bytes> in;
    for (int q = 0; q < view.size; ++q) in.push_back(test::make_input(DType::kFloat32, ReduceOp::kSum, q, count, i));
    test::Bytes out(count * 4, 0xCD);
    std::atomic<const char*> chosen{nullptr};
    Args a;
    a.coll = Collective::kAllReduce;
    a.red.op = ReduceOp::kSum;
    a.send = Buffer(in[static_cast<std::size_t>(view.rank)].data(), count, DType::kFloat32);
    a.recv = Buffer(out.data(), count, DType::kFloat32);
    a.chosen_algorithm = &chosen;
    engine.run(a, "", test::soon(), i);
    const std::string why = test::check_reduction(out.data(), count, DType::kFloat32, a.red, in, 0);
    if (!why.empty()) rec.failures.push_back(fmt::format("call {}: {}", i, why));
    names.emplace_back(chosen.load() != nullptr ? chosen.load() : "?");
    rows += names.back() + ",";
  }
  rec.digests.push_back(test::digest(rows.data(), rows.size()));  // every rank the same row at every call
  return names;
}

// The trial's calls alternate `names[kStartAfter]` and another row in blocks; before it, that row alone. Returns the
// other row, or "" (with failures recorded).
std::string check_trial_rows(const std::vector<std::string>& names, test::RankRecord& rec) {
  const uint64_t s = LoopTrial::kStartAfter;
  const std::string& choice = names[s];
  const std::string& other = names[s + LoopTrial::kBlock];
  if (choice == other) {
    rec.failures.push_back("the trial's blocks ran one algorithm: " + choice);
    return "";
  }
  for (uint64_t i = s; i < s + kTrialCalls; ++i) {
    const std::string& want = (i - s) / LoopTrial::kBlock % 2 == 0 ? choice : other;
    if (names[i] != want) rec.failures.push_back(fmt::format("call {} ran {}, not {}", i, names[i], want));
  }
  for (uint64_t i = 1; i < s; ++i) {
    if (names[i] != choice) rec.failures.push_back(fmt::format("call {} ran {} before the trial", i, names[i]));
  }
  if (names.back() != choice && names.back() != other) rec.failures.push_back("after the trial: " + names.back());
  return other;
}
}  // namespace

TEST_CASE("loop trial: the class's calls from kStartAfter alternate the two rows in blocks, then none", "[tuner]") {
  LoopTrial t("cma", "shm_direct", kTieMargin);
  for (uint64_t call = 1; call < LoopTrial::kStartAfter + kTrialCalls + 50; ++call) {  // call 0 was measured
    INFO("call " << call);
    const bool due = t.due();
    const int row = t.next_row();
    if (call < LoopTrial::kStartAfter || call >= LoopTrial::kStartAfter + kTrialCalls) {
      CHECK(row == -1);
      CHECK(due == (call >= LoopTrial::kStartAfter + kTrialCalls));
      continue;
    }
    CHECK(row == static_cast<int>((call - LoopTrial::kStartAfter) / LoopTrial::kBlock % 2));
    CHECK(!due);
    t.record(row, 1e-6);
  }
  CHECK(t.name(0) == "cma");
  CHECK(t.name(1) == "shm_direct");
}

TEST_CASE("loop trial: a row's pace is its better block's time a call, its first call untimed; an untimed call "
          "spoils its block",
          "[tuner]") {
  LoopTrial t("cma", "shm_direct", kTieMargin);
  for (uint64_t call = 1; call < LoopTrial::kStartAfter; ++call) REQUIRE(t.next_row() == -1);
  CHECK(std::isinf(t.paces()[0]));  // no block yet
  CHECK(std::isinf(t.paces()[1]));
  // Block 0 (row 0): 10 us a call, its first call 500 us (the switch). Block 1 (row 1): 7 us, one call untimed.
  // Block 2 (row 0): 12 us. Block 3 (row 1): 8 us.
  const double per_block[4] = {10e-6, 7e-6, 12e-6, 8e-6};
  for (int b = 0; b < LoopTrial::kBlocks; ++b) {
    for (int k = 0; k < LoopTrial::kBlock; ++k) {
      const int row = t.next_row();
      REQUIRE(row == b % 2);
      double s = k == 0 ? 500e-6 : per_block[b];
      if (b == 1 && k == 3) s = std::numeric_limits<double>::quiet_NaN();
      t.record(row, s);
    }
  }
  REQUIRE(t.due());
  const std::vector<double> p = t.paces();
  CHECK(p[0] == Approx(10e-6));  // the better of 10 and 12; the 500 us first call left out
  CHECK(p[1] == Approx(8e-6));   // block 1 spoiled by its untimed call: block 3's
}

TEST_CASE("loop trial: the runner-up replaces the choice only where faster by more than the margin", "[tuner]") {
  LoopTrial t("cma", "shm_direct", 0.10, "before call #3, ...");
  CHECK(t.keep({11.7e-6, 9.4e-6}) == 1);  // all_reduce of 64 KiB, inputs just written (session 32)
  CHECK(t.keep({6.0e-6, 7.9e-6}) == 0);   // inputs written once
  CHECK(t.keep({10e-6, 9.5e-6}) == 0);    // 5% faster: within the margin, the choice stays
  CHECK(t.keep({10e-6, std::numeric_limits<double>::infinity()}) == 0);  // the runner-up never timed
  const std::string text = t.describe({11.7e-6, 9.4e-6}, 1);
  INFO(text);
  CHECK(text.find("before call #3, ...; then on this program's calls 64-95 of the class") != std::string::npos);
  CHECK(text.find("cma 11.7 us, shm_direct 9.4 us: shm_direct replaces cma") != std::string::npos);
  LoopTrial tight("cma", "shm_direct", 0.02);
  CHECK(tight.keep({10e-6, 9.5e-6}) == 1);  // the margin it was given
}

TEST_CASE("loop trial through an engine: every rank runs the same row at every call, results right throughout",
          "[collectives][tuner]") {
  test::ScopedEnv env("DCOMM_TUNE", "on");
  // 1,500 floats (6,000 B, the 4-8 KiB class), then enough calls for the trial and a few after it.
  const std::size_t count = 1500;
  const uint64_t calls = LoopTrial::kStartAfter + kTrialCalls + 12;
  for (int size : {3, 4}) {
    auto records = test::run_group(size, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      const std::vector<std::string> names = all_reduces(*engine, view, count, calls, rec);
      const std::string text = engine->explain(Collective::kAllReduce, count * 4);
      // The tuner measured at call 0; a row within LoopTrial::kWithin of its choice was then tried on calls 64-95.
      if (text.find("then on this program's calls 64-95 of the class") == std::string::npos) {
        rec.failures.push_back("no loop trial in explain: " + text);
        return;
      }
      if (check_trial_rows(names, rec).empty()) return;
      // After it, the row it kept, which explain() names.
      if (text.find("choice: " + names.back() + " (measured by this group") == std::string::npos) {
        rec.failures.push_back("explain names another choice than " + names.back() + ": " + text);
      }
    });
    auto failures = test::summarize(records);
    INFO(size << " ranks: " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("loop trial of the cost model's choice: a one-node group whose windows cross fast tries it against the "
          "model's runner-up",
          "[collectives][tuner]") {
  // DCOMM_TUNE=auto, plain window stores crossing fast: the model chooses (the tuner measures nothing), and its
  // choice is tried on calls 64-95 against the next cheapest row (priced within LoopTrial::kModelWithin). 2 ranks
  // bound, all_reduce of 64 KiB: the model's shm_direct ran 8.1 us a call, cma 6.2, and cma replaced it (session 32).
  test::ScopedEnv tune("DCOMM_TUNE", nullptr);
  test::ScopedEnv stores("DCOMM_SHM_CACHED", "1");
  test::ScopedEnv price("DCOMM_SHM_WINDOW_PRICE", "0.03");
  const std::size_t count = 16384;  // 64 KiB
  auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
    // Threads as ranks share the process's cores, where groups measure everything: a core each, as bound ranks.
    auto engine = Engine::create(test::with_topology(view, [](Topology& t) { t.shares_cores = false; }));
    const std::vector<std::string> names = all_reduces(*engine, view, count, LoopTrial::kStartAfter + kTrialCalls + 8, rec);
    const std::string other = check_trial_rows(names, rec);
    if (other.empty()) return;
    const std::string text = engine->explain(Collective::kAllReduce, count * 4);
    // Kept: the model chooses as before. Replaced: a learned rule says what was tried.
    const bool kept = names.back() == names[LoopTrial::kStartAfter];
    const std::string want = kept ? "(cost model)" : "the cost model's choice (";
    if (text.find(want) == std::string::npos) rec.failures.push_back("explain lacks '" + want + "': " + text);
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}
