// Choices measured online (DCOMM_TUNE, collectives/tuner.hpp): the pick, the classes measured, every collective
// right after its measurement (in place, roots, odd sizes), the learned rule in explain(), a mismatched call at a
// class to measure failing as without the tuner, and the knob's bad values named.

#include <map>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <dcomm/error.hpp>
#include <limits>
#include <string>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/rules.hpp"
#include "collectives/selector.hpp"
#include "collectives/tuner.hpp"
#include "tests/collectives/cases.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

using test::soon;

TEST_CASE("pick_measured: the fastest row, the model's while within the margin", "[collectives][tuner]") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(pick_measured({3e-6, 1e-6, 2e-6}, 0) == 1);
  CHECK(pick_measured({1.05e-6, 1e-6, 2e-6}, 0) == 0);  // within 10%: the model's choice stays
  CHECK(pick_measured({1.2e-6, 1e-6, 2e-6}, 0) == 1);
  CHECK(pick_measured({inf, 2e-6, 1e-6}, 0) == 2);       // the model's row could not run
  CHECK(pick_measured({5e-6, inf, 4e-6}, 1) == 2);
  CHECK(pick_measured({2e-6, 1e-6}, 0, 0.0) == 1);
  // Rows within 10% of the fastest: the first in the table, whichever measured a hair faster.
  CHECK(pick_measured({9e-6, 1.08e-6, 1e-6, 5e-6}, 0) == 1);
  CHECK(pick_measured({9e-6, 1e-6, 1.08e-6, 5e-6}, 0) == 1);
  CHECK(pick_measured({9e-6, 1.15e-6, 1e-6, 5e-6}, 0) == 2);
  CHECK(pick_measured({inf, inf}, 0) == 0);  // nothing ran: the caller learns nothing (not finite)
}

TEST_CASE("tune_class: host calls of 4 KiB to 64 MiB, by the model's n", "[collectives][tuner]") {
  std::vector<float> x(1 << 14);
  Args a;
  a.coll = Collective::kAllReduce;
  a.send = a.recv = Buffer(x.data(), 1024);  // 4 KiB
  CHECK(tune_class(a, 3) == 12);
  a.send = a.recv = Buffer(x.data(), 1023);
  CHECK(tune_class(a, 3) == -1);
  a.send = a.recv = Buffer(x.data(), 5000);  // 20,000 B
  CHECK(tune_class(a, 3) == 14);
  a.red.op = ReduceOp::kPreMulSum;
  CHECK(tune_class(a, 3) == -1);
  a.red.op = ReduceOp::kSum;
  a.send.device = a.recv.device = Device::cuda(0);
  CHECK(tune_class(a, 3) == -1);
  Args g;  // an all_gather's n is what it gathers: 3 ranks x 2,000 B
  g.coll = Collective::kAllGather;
  g.send = Buffer(x.data(), 500);
  g.recv = Buffer(x.data(), 1500);
  CHECK(tune_class(g, 3) == 12);
  g.vector_variant = true;
  CHECK(tune_class(g, 3) == -1);
  Args big;
  big.coll = Collective::kBroadcast;
  big.send = big.recv = Buffer(nullptr, (std::size_t{64} << 20) + 1, DType::kUInt8);
  CHECK(tune_class(big, 3) == -1);
}

TEST_CASE("a learned rule covers its size class; the largest class's every larger call too", "[collectives][tuner]") {
  // Calls past 64 MiB are not measured (above), and the model's choice there is the one the 64 MiB class measured
  // against: all_reduce[cma] 19.1 ms at 64 MiB, 36.5 at 128, where the measured shm_direct took 14.5 and 28.6.
  CHECK(tuned_class_end(12) == 8192);
  CHECK(tuned_class_end(25) == (uint64_t{64} << 20));
  CHECK(tuned_class_end(26) == UINT64_MAX);
}

namespace {

// An all_reduce in place of the first `count` floats of `x`, with `algorithm` ("": the group's own choice).
void sum_in_place(Engine& engine, std::vector<float>& x, std::size_t count, uint64_t seq,
                  const std::string& algorithm = "") {
  Args a;
  a.coll = Collective::kAllReduce;
  a.send = a.recv = Buffer(x.data(), count);
  engine.run(a, algorithm, soon(), seq);
}

// Every collective through the group's own choice (an unnamed row: the engine runs it with no algorithm named),
// at sizes the tuner measures and the sizes around them, checked against the serial reference.
void every_collective_auto(test::RankState& s) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduce, Collective::kReduceScatter,
                       Collective::kBroadcast, Collective::kScatter, Collective::kGather, Collective::kAllGather,
                       Collective::kAllToAll}) {
    Algorithm auto_row{};
    auto_row.collective = c;
    auto_row.name = "";
    for (std::size_t count : {std::size_t{1}, std::size_t{1500}, std::size_t{1501}, std::size_t{7777}}) {
      for (bool in_place : {false, true}) {
        test::Case k;
        k.count = count;
        k.in_place = in_place;
        k.root = static_cast<int>(count % static_cast<std::size_t>(s.view.size));
        k.salt = count * 7 + (in_place ? 1 : 0);
        test::run_case(s, auto_row, k);
      }
    }
  }
}

}  // namespace

TEST_CASE("DCOMM_TUNE=on: every collective measured at its first call of a class, right, and explained",
          "[collectives][tuner]") {
  test::ScopedEnv env("DCOMM_TUNE", "on");
  for (int size : {3, 4}) {
    auto records = test::run_group(size, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      test::RankState s{*engine, view, rec};
      every_collective_auto(s);
      // 1500 floats of all_reduce (6,000 B) were first measured at the first call of class 4-8 KiB: 2 runs of 16
      // calls.
      const std::string text = engine->explain(Collective::kAllReduce, 6000);
      if (text.find("measured by this group, DCOMM_TUNE: before call #") == std::string::npos ||
          text.find("the slowest rank's better of 2 runs of 16 calls, a call:") == std::string::npos) {
        rec.failures.push_back("no learned rule in explain: " + text);
      }
      // A size of the same class is not measured again: its choice is the same rule's.
      if (engine->explain(Collective::kAllReduce, 7000).substr(text.find("choice:")) != text.substr(text.find("choice:"))) {
        rec.failures.push_back("another size of the class explained differently");
      }
      if (engine->explain(Collective::kAllReduce, 1000).find("(cost model)") == std::string::npos) {
        rec.failures.push_back("a size below 4 KiB was measured");
      }
      // What each rank learned is the same: the digests of the choices compare across ranks.
      std::string choices;
      for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kGather}) {
        const std::string e = engine->explain(c, 6000);
        choices += e.substr(e.find("choice:"), e.find(" (") - e.find("choice:"));
      }
      rec.digests.push_back(test::digest(choices.data(), choices.size()));
    });
    auto failures = test::summarize(records);
    INFO(size << " ranks: " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("DCOMM_TUNE: a mismatched or invalid call at a class to measure fails on every rank, as without it",
          "[collectives][tuner]") {
  test::ScopedEnv env("DCOMM_TUNE", "on");
  struct Bad {
    const char* name;
    std::size_t count_on_2;  // rank 2's count (the others: 2,000 floats, 8,000 B, a class to measure)
    bool null_on_2;
    const char* expect;
  };
  for (const Bad& bad : {Bad{"count", 2001, false, "count 2001 vs 2000"},
                         Bad{"count below the measured sizes", 10, false, "count 10 vs 2000"},
                         Bad{"invalid", 2000, true, "invalid on rank 2"}}) {
    auto records = test::run_group(4, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      std::vector<float> x(4000, 1.0f);
      Args a;
      a.coll = Collective::kAllReduce;
      a.send = a.recv = Buffer(x.data(), view.rank == 2 ? bad.count_on_2 : 2000);
      if (view.rank == 2 && bad.null_on_2) a.send.data = a.recv.data = nullptr;
      const std::string m = test::invalid_message([&] { engine->run(a, "", soon(), 0); });
      if (m.find("rank 2") == std::string::npos || m.find(bad.expect) == std::string::npos) {
        rec.failures.push_back(std::string(bad.name) + ": " + m);
      }
      // The group is in step, and the class is measured at its next valid call.
      a.send = a.recv = Buffer(x.data(), 2000);
      engine->run(a, "", soon(), 1);
      if (x[0] != 4.0f || x[1999] != 4.0f) rec.failures.push_back(fmt::format("{}: sum {} after", bad.name, x[0]));
      if (engine->explain(Collective::kAllReduce, 8000).find("before call #1") == std::string::npos) {
        rec.failures.push_back(std::string(bad.name) + ": not measured at the next call");
      }
    });
    auto failures = test::summarize(records);
    INFO(bad.name << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("DCOMM_TUNE: named choices are not measured, off measures nothing, bad values are named",
          "[collectives][tuner]") {
  {
    test::ScopedEnv env("DCOMM_TUNE", "on");
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      engine->set_algorithm(Collective::kAllReduce, "ring");
      std::vector<float> x(2000, 1.0f);
      sum_in_place(*engine, x, 2000, 0);
      engine->set_algorithm(Collective::kAllReduce, "");
      if (engine->explain(Collective::kAllReduce, 8000).find("(cost model)") == std::string::npos) {
        rec.failures.push_back("a forced call was measured");
      }
      sum_in_place(*engine, x, 2000, 1, "tree");  // named by the call
      if (engine->explain(Collective::kAllReduce, 8000).find("(cost model)") == std::string::npos) {
        rec.failures.push_back("a named call was measured");
      }
      sum_in_place(*engine, x, 2000, 2);
      if (engine->explain(Collective::kAllReduce, 8000).find("before call #2") == std::string::npos) {
        rec.failures.push_back("the first call of the model's was not measured");
      }
      if (x[0] != 27.0f) rec.failures.push_back(fmt::format("sum {} after three calls", x[0]));
    });
    auto failures = test::summarize(records);
    CHECK(failures.empty());
  }
  {
    test::ScopedEnv env("DCOMM_TUNE", "off");
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      std::vector<float> x(2000, 1.0f);
      sum_in_place(*engine, x, 2000, 0);
      if (engine->explain(Collective::kAllReduce, 8000).find("(cost model)") == std::string::npos) {
        rec.failures.push_back("measured with DCOMM_TUNE=off");
      }
    });
    CHECK(test::summarize(records).empty());
  }
  test::ScopedEnv env("DCOMM_TUNE", "sometimes");
  auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
    const std::string m = test::invalid_message([&] { Engine::create(view); });
    if (m.find("DCOMM_TUNE='sometimes'") == std::string::npos) rec.failures.push_back(m);
  });
  CHECK(test::summarize(records).empty());
}

TEST_CASE("DCOMM_TUNE_OUT: rank 0 saves what the group learned; a later group takes it from the file",
          "[collectives][tuner]") {
  const std::string path = "/tmp/dcomm_tune_out_" + std::to_string(::getpid()) + ".json";
  std::remove(path.c_str());
  std::string learned;
  {
    test::ScopedEnv env("DCOMM_TUNE", "on");
    test::ScopedEnv out("DCOMM_TUNE_OUT", path.c_str());
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      std::vector<float> x(3000, 1.0f);
      sum_in_place(*engine, x, 2000, 0);  // 8,000 B: class 4-8 KiB
      sum_in_place(*engine, x, 3000, 1);  // 12,000 B: class 8-16 KiB
      if (x[0] != 9.0f) rec.failures.push_back(fmt::format("sum {}", x[0]));
      if (view.rank == 0) {
        const std::string e = engine->explain(Collective::kAllReduce, 8000);
        learned = e.substr(e.find("choice: ") + 8, e.find(" (measured by") - e.find("choice: ") - 8);
      }
    });
    REQUIRE(test::summarize(records).empty());
  }
  const std::vector<Rule> saved = load_rules(path);
  REQUIRE(saved.size() == 2);
  CHECK(describe(saved[0]) == "all_reduce on 3 ranks, 4.0 KiB to 8.0 KiB: " + learned);
  CHECK(saved[1].min_bytes == 8192);
  CHECK(saved[1].max_bytes == 16384);
  test::ScopedEnv env("DCOMM_TUNE", "on");
  test::ScopedEnv rules("DCOMM_RULES_FILE", path.c_str());
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::vector<float> x(2000, 1.0f);
    sum_in_place(*engine, x, 2000, 0);
    const std::string e = engine->explain(Collective::kAllReduce, 8000);
    if (e.find("choice: " + learned + " (measured: " + path) == std::string::npos) {
      rec.failures.push_back("the saved rule was not taken from the file: " + e);
    }
  });
  CHECK(test::summarize(records).empty());
  std::remove(path.c_str());
}

TEST_CASE("DCOMM_TUNE=auto on one node: measured where the windows take non-temporal stores or lines cross cores "
          "slowly, not where plain stores cross fast",
          "[collectives][tuner]") {
  // Session 16, 2 ranks bound: with non-temporal window stores the model's choices measured 1.3-3x the fastest
  // row's time at 16 KiB - 4 MiB (its β is the link probe's, 4x the transport's steady 0.02-0.03 ns a byte); with
  // plain ones (the probe's small pattern at 0.03 ns a byte) 37 of 40 sizes and collectives were within 10% of the
  // fastest, as the model chose. Session 19: plain stores, but the small pattern at 0.125 ns a byte - the model's
  // window rows 2-3x the message rows' time (windows_cross_slowly).
  test::ScopedEnv tune("DCOMM_TUNE", nullptr);
  struct Case {
    const char* cached;
    const char* price;  // ns a byte: DCOMM_SHM_WINDOW_PRICE
    bool measured;
  };
  for (const Case& k : {Case{"0", "0.03", true}, Case{"1", "0.03", false}, Case{"1", "0.125", true},
                        Case{"1", "0.06", true}, Case{"0", "0.125", true}}) {
    const char* cached = k.cached;
    test::ScopedEnv stores("DCOMM_SHM_CACHED", cached);
    test::ScopedEnv price("DCOMM_SHM_WINDOW_PRICE", k.price);
    auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
      // Threads as ranks share the process's cores, where groups always measure: a core each, as bound ranks.
      auto engine = Engine::create(test::with_topology(view, [](Topology& t) { t.shares_cores = false; }));
      std::vector<float> x(2000, 1.0f);
      sum_in_place(*engine, x, 2000, 0);  // 8,000 B: class 4-8 KiB
      if (x[0] != 2.0f || x[1999] != 2.0f) rec.failures.push_back(fmt::format("sum {}", x[0]));
      const std::string e = engine->explain(Collective::kAllReduce, 8000);
      const bool measured = e.find("measured by this group, DCOMM_TUNE: before call #0") != std::string::npos;
      if (k.measured && !measured) rec.failures.push_back("not measured: " + e);
      if (!k.measured && measured) rec.failures.push_back("plain windows crossing fast, measured: " + e);
      // Where plain stores cross slowly, measured at every size the tuner measures for the collectives in which every
      // rank sends and receives (session 30: all_reduce and all_gather at 32-64 MiB, the model's cma 1.26-1.33x the
      // fastest row's time), up to 32 MiB for the rooted ones (kTuneSlowLinesMaxBytes: the model's choices at 16
      // MiB took 1.1-1.4x OpenMPI's time there); under non-temporal stores up to 32 MiB for the former
      // (kTuneNonTemporalMaxBytes: all_gather[cma] at 16 MiB), from 8 MiB (kTuneWindowsMaxBytes) by the model for
      // the rooted ones, whose choices were as fast as the measured ones.
      const bool non_temporal = std::string(cached) == "0";
      uint64_t seq = 1;
      for (const std::size_t mib : {8, 32}) {
        std::vector<float> big(mib << 18, 1.0f);
        sum_in_place(*engine, big, big.size(), seq++);
        if (big[0] != 2.0f || big.back() != 2.0f) rec.failures.push_back(fmt::format("{} MiB sum {}", mib, big[0]));
        const std::string large = engine->explain(Collective::kAllReduce, mib << 20);
        const bool model = large.find("(cost model)") != std::string::npos;
        if (model != ((mib == 32 && non_temporal) || !k.measured)) {
          rec.failures.push_back(fmt::format("{} MiB {}: {}", mib, model ? "not measured" : "measured", large));
        }
      }
      // A broadcast of 8 MiB, its data checked on the reader.
      std::vector<float> b(std::size_t{8} << 18, view.rank == 0 ? 3.0f : -1.0f);
      Args bc;
      bc.coll = Collective::kBroadcast;
      bc.send = bc.recv = Buffer(b.data(), b.size());
      engine->run(bc, "", soon(), seq++);
      if (b[0] != 3.0f || b.back() != 3.0f) rec.failures.push_back(fmt::format("8 MiB broadcast {}", b[0]));
      const std::string rooted = engine->explain(Collective::kBroadcast, std::size_t{8} << 20);
      const bool rooted_model = rooted.find("(cost model)") != std::string::npos;
      if (rooted_model != (non_temporal || !k.measured)) {
        rec.failures.push_back(fmt::format("8 MiB broadcast {}: {}", rooted_model ? "not measured" : "measured", rooted));
      }
    });
    auto failures = test::summarize(records);
    INFO("DCOMM_SHM_CACHED=" << cached << " DCOMM_SHM_WINDOW_PRICE=" << k.price << ": "
                              << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("learned rules in sets: each counts while its set is in use, and is learned and saved with it",
          "[collectives][tuner]") {
  auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
    Selector s(test::one_node_params(), "test", {}, {}, "");
    const Args a = sample_args(Collective::kAllReduce, 6000, 2);
    const std::string model = s.choose(a, view, "").name;
    const std::string first = model == "ring" ? "tree" : "ring";
    const std::string second = model == "bruck" ? "butterfly" : "bruck";
    Rule r;
    r.coll = Collective::kAllReduce;
    r.ranks = 2;
    r.min_bytes = 4096;
    r.max_bytes = 8192;
    auto fail_if = [&](bool bad, const std::string& what) {
      if (bad) rec.failures.push_back(what);
    };
    auto chosen = [&] { return std::string(s.choose(a, view, "").name); };
    r.algorithm = first;
    s.add_learned(r, "measured in set 0");
    fail_if(!s.decided(a, view) || chosen() != first || s.learned_rules().size() != 1, "set 0: not learned");
    s.use_learned(1);
    fail_if(s.decided(a, view) || chosen() != model || !s.learned_rules().empty(), "set 1: set 0's rule counts");
    r.algorithm = second;
    s.add_learned(r, "measured in set 1");
    fail_if(chosen() != second || s.learned_rules().size() != 1 || s.learned_rules()[0].algorithm != second,
            "set 1: not learned");
    fail_if(s.explain(Collective::kAllReduce, 6000, view).find("measured in set 1") == std::string::npos,
            "set 1's rule not explained");
    s.use_learned(0);
    fail_if(chosen() != first || s.learned_rules()[0].algorithm != first, "back to set 0: its rule lost");
  });
  CHECK(test::summarize(records).empty());
}

TEST_CASE("DCOMM_TUNE=auto on one node: a group whose windows turn non-temporal measures from then on, back to the "
          "model when they turn plain, measures anew where lines cross slowly, and takes each state's measured rules "
          "again without measuring when it returns",
          "[collectives][tuner]") {
  // The windows' stores change at a measurement again (every call of 1 MiB here): its answer is forced by
  // DCOMM_SHM_CACHED, set between calls (only then read: at group creation it is unset, so the group measures
  // again at all).
  test::ScopedEnv tune("DCOMM_TUNE", nullptr);
  test::ScopedEnv stores("DCOMM_SHM_CACHED", nullptr);
  test::ScopedEnv price("DCOMM_SHM_WINDOW_PRICE", "0.03");  // plain stores crossing fast (windows_cross_slowly)
  test::ScopedEnv every("DCOMM_SHM_REPROBE_CALLS", "1");
  std::barrier<> step(2);
  auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(test::with_topology(view, [](Topology& t) { t.shares_cores = false; }));
    std::vector<float> big(std::size_t{1} << 18, 1.0f), small(1500, 1.0f);
    uint64_t seq = 0;
    float expect_big = 1.0f, expect_small = 1.0f;
    // Sets the windows' answer for the next measurement again, on both ranks before either measures.
    auto windows = [&](const char* cached, const char* price = "0.03") {
      step.arrive_and_wait();
      if (view.rank == 0) {
        ::setenv("DCOMM_SHM_CACHED", cached, 1);
        ::setenv("DCOMM_SHM_WINDOW_PRICE", price, 1);
      }
      step.arrive_and_wait();
      sum_in_place(*engine, big, big.size(), seq++);  // measured again before this call, 1 MiB: due after it
      expect_big *= 2;
      sum_in_place(*engine, small, small.size(), seq++);  // 6,000 B: class 4-8 KiB
      expect_small *= 2;
      if (big[0] != expect_big || small[1499] != expect_small) {
        rec.failures.push_back(fmt::format("DCOMM_SHM_CACHED={}: sums {} and {}", cached, big[0], small[1499]));
      }
      const std::string e = engine->explain(Collective::kAllReduce, 6000);
      return e.substr(e.find("choice:"));
    };
    sum_in_place(*engine, big, big.size(), seq++);  // whatever the windows at creation: a measurement is due after
    expect_big *= 2;
    const std::string measured = windows("0");
    if (measured.find("measured by this group, DCOMM_TUNE") == std::string::npos) {
      rec.failures.push_back("non-temporal windows, not measured: " + measured);
    }
    const std::string plain = windows("1");
    if (plain.find("(cost model)") == std::string::npos) rec.failures.push_back("plain windows, not the model: " + plain);
    // Plain stores where lines cross slowly: measured, into a set of its own (not the non-temporal one's rule).
    const std::string slow = windows("1", "0.125");
    if (slow.find("measured by this group, DCOMM_TUNE") == std::string::npos || slow == measured) {
      rec.failures.push_back("plain windows crossing slowly, not measured anew: " + slow + " / " + measured);
    }
    const std::string again = windows("0");
    if (again != measured) rec.failures.push_back("non-temporal again, measured anew: " + again + " / " + measured);
    if (windows("1", "0.125") != slow) rec.failures.push_back("slow lines again, measured anew");
    if (windows("1").find("(cost model)") == std::string::npos) rec.failures.push_back("plain again, not the model");
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}
