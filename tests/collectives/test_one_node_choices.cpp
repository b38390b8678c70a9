// The cost model's choices on one node (threads as ranks on a real mesh, priced by each rank): single copies,
// pipes and shared-memory rounds as measured, where ranks own their cores and where they share them, with
// non-temporal and with plain window stores (collectives/window_probe.hpp; the probe itself: test_window_probe.cpp).

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/cost_model.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slots.hpp"
#include "collectives/topology.hpp"
#include "collectives/window_probe.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

namespace {

// What a window probe measured on a node whose ranks have cores of their own (Topology's window fields): plain
// stores or not, the 1 MiB pattern's time each way, the 64 KiB pattern's price a byte (0: not measured).
struct Probed {
  bool plain = false;
  double plain_seconds = 0, streamed_seconds = 0, small_per_byte = 0;
};

GroupView probed_view(const GroupView& node, const Probed& m) {
  return test::with_topology(node, [&](Topology& t) {
    t.shares_cores = false;
    t.cached_windows = m.plain;
    t.cached_small_windows = m.plain;
    t.window_small_seconds_per_byte = m.small_per_byte;
    t.window_plain_seconds = m.plain_seconds;
    t.window_streamed_seconds = m.streamed_seconds;
  });
}

}  // namespace

TEST_CASE(
    "one node: all_to_all takes single copies (cma) to 1 MiB, the pipe from 4 MiB; reduce the pipe on 2 ranks; "
    "all_reduce single copies from 64-256 KiB, all_gather from 64 KiB",
    "[collectives][engine]") {
  // The built-in one-node parameters, which a probe on one node settles on (coll::stabilize). Where measured
  // (docs/algorithms.md), cma was as fast as pairwise on 2 ranks and faster on 3-4, and faster than shm_direct
  // from 256 KiB up to 1-2 MiB (2 ranks) and 2-4 MiB (4 ranks); shm_direct was faster beyond. The one-node rows
  // need a group on a real mesh: threads as ranks, priced by each rank (only the main thread asserts).
  const CostParams p = test::one_node_params();
  for (int size : {2, 3, 4}) {
    auto recs = test::run_group(size, [&](const GroupView& node, test::RankRecord& rec) {
      auto expect = [&](const Args& a, const std::string& want, const std::string& what) {
        const Algorithm* chosen = cheapest(a, node, p);
        const std::string got = chosen != nullptr ? chosen->name : "(none)";
        if (got != want) rec.failures.push_back(fmt::format("{} ranks, {}: {} where {} was expected", size, what, got, want));
      };
      for (std::size_t bytes : {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20,
                                std::size_t{64} << 20}) {
        const std::size_t count = bytes / static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
        expect(sample_args(Collective::kAllToAll, count, size), bytes <= (std::size_t{1} << 20) ? "cma" : "shm_direct",
               fmt::format("{} B", count));
      }
      // reduce on 2 ranks: shm_pipe measured 0.3-1.0x MPI's time at every size where cma took 0.75-1.7x.
      for (std::size_t bytes : {std::size_t{16} << 10, std::size_t{256} << 10, std::size_t{4} << 20}) {
        if (size == 2) expect(sample_args(Collective::kReduce, bytes, size), "shm_pipe", fmt::format("reduce of {} B", bytes));
      }
      // all_reduce: cma measured 1.1-2.7x faster than shm_direct on 2 ranks from 64 KiB to 64 MiB, two quiet runs
      // (docs/benchmark.md "Session 6"); priced with shm_direct's window reads at β, the engine's copy before the
      // rows that need one, and a system call per CMA copy at α, the model takes it there (from 256 KiB on 3-4).
      for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{4} << 20,
                                std::size_t{64} << 20}) {
        if (size > 2 && bytes < (std::size_t{256} << 10)) continue;
        expect(sample_args(Collective::kAllReduce, bytes, size), "cma", fmt::format("all_reduce of {} B", bytes));
      }
      // all_gather: cma (one copy per byte) measured 1.2-1.5x faster than shm_direct (two) on 2 ranks bound to a
      // core each from 256 KiB to 4 MiB, and 1.5-2x faster than ring from 64 KiB (not below: docs/algorithms.md); on
      // 3-4 ranks sharing 2 cores shm_direct was 1.3-3x faster than cma (rough, docs/algorithms.md). Priced with
      // shm_direct's window reads at β where every rank owns its core, the model takes cma there (and on 3-4 ranks with
      // a core each, where its one round of reads beats ring's P-1 rounds), shm_direct where ranks share cores. Whether
      // these threads share cores depends on the machine: both cases are checked, sharing also forced.
      const bool shared = node.hierarchy && node.hierarchy->topo.shares_cores;
      CostParams sharing = p;
      sharing.shared_cores = true;
      for (std::size_t bytes :
           {std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
        const std::size_t count = bytes / static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
        const Args a = sample_args(Collective::kAllGather, count, size);
        expect(a, shared ? "shm_direct" : "cma",
               fmt::format("all_gather of {} B{}", count, shared ? ", cores shared" : ""));
        const std::string got = cheapest(a, node, sharing)->name;
        if (got != "shm_direct")
          rec.failures.push_back(fmt::format("{} ranks, all_gather of {} B, cores shared: {}", size, count, got));
      }
      // 64 MiB, a core each: past the cache cma's single copies ran at memory speed (2 ranks: 11.4 ms against
      // shm_direct's 7.7), the pipe overlaps its two copies.
      if (!shared) {
        const std::size_t count = (std::size_t{64} << 20) / static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
        expect(sample_args(Collective::kAllGather, count, size), "shm_direct", fmt::format("all_gather of {} B", count));
      }
      // reduce of 64 KiB on ranks that share cores: not cma (4 ranks on 2 cores: cma 57 us, shm_pipe 31, shm_direct
      // 32, session 8; its root waits for every rank to be scheduled to write its slice).
      if (size > 2) {
        const std::string got = cheapest(sample_args(Collective::kReduce, std::size_t{64} << 10, size), node, sharing)->name;
        if (got == "cma") rec.failures.push_back(fmt::format("{} ranks, reduce of 64 KiB, cores shared: cma", size));
      }
      // 16 KiB on ranks that share cores: not cma (3 ranks on 2 cores: cma 19 us, shm_direct 9, ring 11).
      if (size > 2) {
        const std::string small_ag = cheapest(sample_args(Collective::kAllGather, 16383, size), node, sharing)->name;
        if (small_ag == "cma")
          rec.failures.push_back(fmt::format("{} ranks, all_gather of 16 KiB, cores shared: cma", size));
      }
      // With the engine's call check (on by default), whose rounds bruck rides on and cma pays on top, 1 KiB is
      // bruck's (or the slot's, where the group has slots).
      CostParams checked = p;
      checked.check_calls = true;
      const std::string tiny = cheapest(sample_args(Collective::kAllGather, 1024, size), node, checked)->name;
      if (tiny != "bruck" && tiny != "slot")
        rec.failures.push_back(fmt::format("{} ranks, all_gather of 1 KiB: {}", size, tiny));
      // Below, what a few bytes cost decides: a latency-bound row, not a single copy (4 KiB: cma 4.6-5.3 us).
      const std::string small = cheapest(sample_args(Collective::kAllReduce, 4096, size), node, p)->name;
      if (small == "cma" || small == "shm_direct") rec.failures.push_back(fmt::format("{} ranks, all_reduce of 4 KiB: {}", size, small));
      // all_to_all_v is neither's: its blocks differ per rank.
      Args v = sample_args(Collective::kAllToAll, std::size_t{1} << 20, size);
      v.vector_variant = true;
      expect(v, "pairwise", "all_to_all_v of 1 MiB");
    });
    CHECK(test::summarize(recs) == std::vector<std::string>{});
  }
  // Across nodes no one-node row is a candidate.
  CHECK(std::string(cheapest(sample_args(Collective::kAllToAll, 1 << 20, 4), test::placed_view({"a", "a", "b", "b"}), p)->name) ==
        "pairwise");
}

TEST_CASE("one node, plain-store windows: all_reduce takes shm_direct, all_gather and all_to_all shm_rounds from 1 MiB, "
          "reduce keeps the pipe",
          "[collectives][engine]") {
  // Where the group's probe found plain stores into the windows faster (collectives/window_probe.hpp), measured on
  // 2 ranks (session 7, docs/algorithms.md): all_reduce[shm_direct] 0.5-0.65x cma's time from 1 MiB to 64 MiB,
  // about cma's at 64-256 KiB. The non-temporal case is the test above. Ranks that share cores never get here (no
  // probe there): forced on, the choices stay those of the test above.
  CostParams p = test::one_node_params();
  p.cached_windows = true;
  CostParams sharing = p;
  sharing.shared_cores = true;
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    auto expect = [&](const Args& a, const CostParams& params, const std::string& want, const std::string& what) {
      const std::string got = cheapest(a, node, params)->name;
      if (got != want) rec.failures.push_back(fmt::format("{}: {} where {} was expected", what, got, want));
    };
    const bool shared = node.hierarchy && node.hierarchy->topo.shares_cores;
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20, std::size_t{64} << 20}) {
      if (!shared) expect(sample_args(Collective::kAllReduce, bytes, 2), p, "shm_direct", fmt::format("all_reduce of {} B", bytes));
      expect(sample_args(Collective::kAllReduce, bytes, 2), sharing, "cma", fmt::format("all_reduce of {} B, cores shared", bytes));
    }
    for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10}) {
      expect(sample_args(Collective::kAllReduce, bytes, 2), p, "cma", fmt::format("all_reduce of {} B", bytes));
    }
    // all_gather: shm_rounds measured 0.55-0.8x cma's time from 1 to 64 MiB, 1.4x at 64-256 KiB (session 8,
    // docs/algorithms.md); with non-temporal stores (the test above) it was 1.1-1.5x cma's, and is not taken.
    // all_to_all likewise: shm_rounds 0.7-0.9x cma's (or shm_direct's, from 16 MiB) time from 1 to 64 MiB.
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20, std::size_t{64} << 20}) {
      if (!shared) expect(sample_args(Collective::kAllToAll, bytes, 2), p, "shm_rounds", fmt::format("all_to_all of {} B", bytes));
      const std::string got = cheapest(sample_args(Collective::kAllToAll, bytes, 2), node, sharing)->name;
      if (got == "shm_rounds") rec.failures.push_back(fmt::format("all_to_all of {} B, cores shared: shm_rounds", bytes));
    }
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20, std::size_t{64} << 20}) {
      if (!shared) expect(sample_args(Collective::kAllGather, bytes, 2), p, "shm_rounds", fmt::format("all_gather of {} B", bytes));
      const std::string got = cheapest(sample_args(Collective::kAllGather, bytes, 2), node, sharing)->name;
      if (got == "shm_rounds") rec.failures.push_back(fmt::format("all_gather of {} B, cores shared: shm_rounds", bytes));
    }
    // Below 1 MiB, without the probe's small pattern (CostParams::window_read_beta), window reads are priced at β:
    // session 8's placement, where shm_rounds took 1.4x cma's time at 64-256 KiB (the next test: measured).
    for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10}) {
      if (!shared) expect(sample_args(Collective::kAllGather, bytes, 2), p, "cma", fmt::format("all_gather of {} B", bytes));
      if (!shared) expect(sample_args(Collective::kAllToAll, bytes, 2), p, "cma", fmt::format("all_to_all of {} B", bytes));
    }
    // reduce: the pipe (its price does not see that its pieces come from memory: docs/algorithms.md).
    for (std::size_t bytes : {std::size_t{16} << 10, std::size_t{256} << 10, std::size_t{4} << 20}) {
      expect(sample_args(Collective::kReduce, bytes, 2), p, "shm_pipe", fmt::format("reduce of {} B", bytes));
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("plain-store windows below 1 MiB follow the probe's small pattern: fast, the window rows from 16 KiB; "
          "slow, cma",
          "[collectives][engine]") {
  // The probe's small pattern (64 KiB in, barrier, out, barrier, plain stores: window_probe.hpp) prices a small
  // round's window reads (Topology::window_small_seconds_per_byte -> CostParams::window_read_beta, priced_for).
  // Measured on 2 ranks bound to a core each (session 10, docs/benchmark.md): the pattern at 0.029 ns a byte, and
  // all_gather[shm_rounds] 1.6 us at 64 KiB against cma's 4.3 (OpenMPI 4.0), all_to_all 2.1 against 5.1,
  // all_reduce[shm_direct] 4.3 against cma's 7.9 (OpenMPI 9.5); session 7's placement measured 0.20-0.25 ns a byte
  // of small window reads, where cma was as fast or faster.
  const CostParams p = test::one_node_params();
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    // The group's topology as the engine builds it, with a core for each rank (where ranks share cores there is
    // no probe to price with) and the probe's answer set here.
    auto priced = [&](double seconds_per_byte) {
      return test::with_topology(node, [&](Topology& t) {
        t.shares_cores = false;
        t.cached_windows = true;
        t.window_small_seconds_per_byte = seconds_per_byte;
      });
    };
    auto expect = [&](const GroupView& v, const Args& a, const std::string& want, const std::string& what) {
      const std::string got = cheapest(a, v, p)->name;
      if (got != want) rec.failures.push_back(fmt::format("{}: {} where {} was expected", what, got, want));
    };
    const GroupView fast = priced(small_price(2.47e-6, 0.29e-6));
    const GroupView slow = priced(0.25e-9 + p.gamma);
    // Checked by every rank (Catch's CHECK belongs to the main thread).
    const double read_fast = priced_for(fast, p).window_read_beta, read_slow = priced_for(slow, p).window_read_beta;
    if (read_fast != 0.0) rec.failures.push_back(fmt::format("fast small pattern: reads at {} s a byte", read_fast));
    if (std::abs(read_slow - 0.25e-9) > 1e-15)
      rec.failures.push_back(fmt::format("slow small pattern: reads at {} s a byte", read_slow));
    if (priced_for(node, p).window_read_beta >= 0)
      rec.failures.push_back("a small window read price without plain-store windows");
    for (std::size_t bytes : {std::size_t{16} << 10, std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20}) {
      const std::string what = fmt::format("{} B, small pattern fast", bytes);
      expect(fast, sample_args(Collective::kAllGather, bytes, 2), "shm_rounds", "all_gather of " + what);
      expect(fast, sample_args(Collective::kAllToAll, bytes, 2), "shm_rounds", "all_to_all of " + what);
      if (bytes >= (std::size_t{64} << 10))
        expect(fast, sample_args(Collective::kAllReduce, bytes, 2), "shm_direct", "all_reduce of " + what);
    }
    // The rooted rows through the windows in rounds, same runs (2 ranks bound, session 10), shm_rounds / OpenMPI /
    // shm_direct's pipe: broadcast 16 KiB 0.72-0.91 / 2.9-3.4 / 3.1-3.9 us, 64 KiB 1.7-1.9 / 5.4-6.7 / 4.7-7.1, 1 MiB
    // 31-35 / 67-89 / 53, 16 MiB 458-502 / 1845-1973 / 1140-1148 us, 64 MiB 2.9-3.0 / 8.3 / 4.6 ms; gather 64 KiB 1.5 /
    // 4.9 / 3.7, 1 MiB 19-24 / 58 / 42, 64 MiB 3.1-3.2 / 5.5 / 4.2 ms; scatter 64 KiB 1.2 / 3.6 / 2.7, 1 MiB 22-24 / 55
    // / 46, 64 MiB 2.9-3.1 / 5.7 / 3.8 ms. Without plain stores (forced, and where ranks share cores: 3 ranks on 2
    // cores measured shm_rounds with non-temporal stores 0.7-1.4x the pipe's time), the pipe as before.
    // reduce_scatter: 2 ranks, 16 KiB 2.5-2.7 / 5.3-6.0 / 4.0-4.8 us, 64 KiB 5.0-5.5 / 10 / 5.3-6.6, 1 MiB 56-63 /
    // 201-206 / 77-82, 64 MiB 6.7-7.2 / 45 / 8.6-8.7 ms.
    for (Collective coll : {Collective::kBroadcast, Collective::kGather, Collective::kScatter, Collective::kReduceScatter}) {
      for (std::size_t bytes : {std::size_t{16} << 10, std::size_t{64} << 10, std::size_t{1} << 20,
                                std::size_t{16} << 20, std::size_t{64} << 20}) {
        const std::string what = fmt::format("{} of {} B", to_string(coll), bytes);
        expect(fast, sample_args(coll, bytes, 2), "shm_rounds", what + ", fast");
        CostParams checked = p;  // as the engine prices (the call check on by default)
        checked.check_calls = true;
        // (reduce_scatter's rounds with non-temporal stores measured 0.65-0.85x the pipe's time too: either is
        // right there.)
        const std::string streamed = cheapest(sample_args(coll, bytes, 2), node, checked)->name;
        if (coll != Collective::kReduceScatter && streamed == "shm_rounds")
          rec.failures.push_back(what + ", non-temporal: shm_rounds");
      }
    }
    for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{256} << 10}) {
      const std::string what = fmt::format("{} B, small pattern slow", bytes);
      expect(slow, sample_args(Collective::kAllGather, bytes, 2), "cma", "all_gather of " + what);
      expect(slow, sample_args(Collective::kAllToAll, bytes, 2), "cma", "all_to_all of " + what);
      expect(slow, sample_args(Collective::kAllReduce, bytes, 2), "cma", "all_reduce of " + what);
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("plain stores for small calls alone: the rows follow the probe's 64 KiB answer up to 256 KiB, its 1 MiB "
          "answer beyond, alike in the model and at run time",
          "[collectives][engine]") {
  // Session 16: a placement where the 1 MiB pattern took 85 us with plain stores against 92 non-temporal (so
  // non-temporal) while 64 KiB took 2.3 us with plain stores; all_reduce[shm_direct] of 64 KiB took 4.2 us with
  // plain window stores against 5.8-6.2 with non-temporal ones.
  const CostParams p = test::one_node_params();
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    auto viewed = [&](bool cached, bool cached_small, bool shared) {
      return test::with_topology(node, [&](Topology& t) {
        t.shares_cores = shared;
        t.cached_windows = cached;
        t.cached_small_windows = cached_small;
        t.window_small_seconds_per_byte = small_price(2.47e-6, 0.29e-6);
      });
    };
    auto fail_if = [&](bool bad, const std::string& what) {
      if (bad) rec.failures.push_back(what);
    };
    std::vector<float> x(std::size_t{1} << 18);
    auto at_run_time = [&](const GroupView& v, std::size_t bytes) {
      Args a;
      a.coll = Collective::kAllReduce;
      a.send = a.recv = Buffer(x.data(), bytes / sizeof(float));
      Context c(a, v, test::soon(), 0, "test", 1 << 19);
      return cached_windows(c);
    };
    const GroupView small_only = viewed(false, true, false);
    const CostParams priced = priced_for(small_only, p);
    fail_if(!priced.plain_windows(64 << 10) || !priced.plain_windows(256 << 10), "small calls priced non-temporal");
    fail_if(priced.plain_windows((256 << 10) + 4) || priced.plain_windows(1 << 20), "a large call priced plain");
    fail_if(priced.window_read_beta < 0, "no small window price where small calls take plain stores");
    fail_if(!at_run_time(small_only, 64 << 10) || !at_run_time(small_only, 256 << 10), "small calls run non-temporal");
    fail_if(at_run_time(small_only, (256 << 10) + 4) || at_run_time(small_only, 1 << 20), "a large call runs plain");
    // The 1 MiB answer covers every size; ranks sharing cores are priced non-temporal (no probe there).
    const GroupView both = viewed(true, true, false);
    fail_if(!priced_for(both, p).plain_windows(64 << 20) || !at_run_time(both, 1 << 20), "plain answer not taken");
    fail_if(priced_for(viewed(false, true, true), p).plain_windows(64 << 10), "cores shared, yet priced plain");
    const GroupView neither = viewed(false, false, false);
    fail_if(priced_for(neither, p).plain_windows(64 << 10) || at_run_time(neither, 64 << 10), "plain without an answer");
    // The model then takes the window row at 64 KiB as it does with plain stores throughout (the test above).
    const std::string got = cheapest(sample_args(Collective::kAllReduce, 64 << 10, 2), small_only, p)->name;
    fail_if(got != "shm_direct", "all_reduce of 64 KiB, small calls plain: " + got);
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("non-temporal windows measured by the probe: all_reduce takes shm_direct at every size; unmeasured, cma",
          "[collectives][engine]") {
  // Session 16, 2 ranks bound, non-temporal window stores, the probe's 1 MiB pattern at 62-116 us with them:
  // all_reduce[shm_direct] measured 0.75-0.9x cma's time from 64 KiB to 64 MiB (64 MiB: 9.2-9.4 ms against
  // 10.8-11.1); priced at β the model took cma everywhere.
  const CostParams p = test::one_node_params();
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    auto probed = [&](double streamed_seconds) {
      return test::with_topology(node, [&](Topology& t) {
        t.shares_cores = false;
        t.cached_windows = false;
        t.window_streamed_seconds = streamed_seconds;
      });
    };
    for (double seconds : {62e-6, 116e-6}) {
      const double read = priced_for(probed(seconds), p).window_streamed_beta;
      if (!(read >= 0 && read < p.beta)) rec.failures.push_back(fmt::format("{} s: read price {}", seconds, read));
      for (std::size_t bytes = std::size_t{64} << 10; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::string got = cheapest(sample_args(Collective::kAllReduce, bytes, 2), probed(seconds), p)->name;
        if (got != "shm_direct") rec.failures.push_back(fmt::format("{} s, {} B: {}", seconds, bytes, got));
      }
    }
    if (priced_for(probed(0), p).window_streamed_beta >= 0) rec.failures.push_back("priced without a measurement");
    const std::string unmeasured = cheapest(sample_args(Collective::kAllReduce, 1 << 20, 2), probed(0), p)->name;
    if (unmeasured != "cma") rec.failures.push_back("unmeasured, 1 MiB: " + unmeasured);
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("reduce where the window probe measured its streamed price: the root's window reads are priced, the pipe "
          "is not taken",
          "[collectives][engine]") {
  // Session 27, 2 ranks bound, DCOMM_TUNE=off, the probe's 1 MiB pattern at 154 us with plain stores (287 us
  // non-temporal), its 64 KiB pattern at 0.116 ns a byte: the model took reduce[shm_pipe] from 16 KiB to 64 MiB,
  // which measured 10-15 us at 64 KiB (cma 7-9, OpenMPI 5-6), 50-54 at 256 KiB (cma 17-22, OpenMPI 15-17) and
  // 3.0-3.5 ms at 16 MiB (cma 1.8, OpenMPI 2.8-2.9): its price read the other ranks' pieces at γ alone, though the
  // root reads every one of them through a window, as the rooted shm_direct rows do (cost_shm_pipe_rooted).
  const CostParams p = test::one_node_params();
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    for (const auto& [plain, seconds] : {std::pair{true, 154e-6}, std::pair{false, 287e-6}}) {
      const GroupView view = probed_view(
          node, {.plain = plain, .streamed_seconds = seconds, .small_per_byte = plain ? std::exp2(-33.0) : 0.0});
      for (std::size_t bytes = std::size_t{16} << 10; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::string got = cheapest(sample_args(Collective::kReduce, bytes, 2), view, p)->name;
        const bool small = bytes <= (std::size_t{256} << 10);
        if (got == "shm_pipe" || (small && got != "cma")) {
          rec.failures.push_back(
              fmt::format("{} windows, reduce of {} B: {}", plain ? "plain" : "non-temporal", bytes, got));
        }
      }
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("plain-store windows: reads past the first 256 KiB at the probe's 1 MiB price; where lines cross slowly "
          "reduce takes cma, where they cross fast all_reduce keeps shm_direct",
          "[collectives][engine]") {
  // Session 28, 2 ranks bound, DCOMM_TUNE=off, the probe's 1 MiB pattern at 181 us with plain stores (296 us
  // non-temporal), its 64 KiB one at 0.116 ns a byte: the model priced the reads past 256 KiB free and took
  // reduce[shm_direct] from 1 to 16 MiB (16 MiB priced 0.63 ms), which measured 3.1-3.2 ms against cma's 2.0-2.3
  // (1 MiB 174-184 us against 123-127, 4 MiB 695-701 against 511-601). Session 7's Zen 4 VM, where the 1 MiB
  // pattern took 46 us with plain stores (123 non-temporal) and all_reduce[shm_direct] 0.5-0.65x cma's time from
  // 1 to 64 MiB, must keep that row.
  const CostParams p = test::one_node_params();
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    const GroupView slow = probed_view(node, {true, 181e-6, 296e-6, std::exp2(-33.0)});
    const GroupView fast = probed_view(node, {true, 46e-6, 123e-6, std::exp2(-35.0)});
    for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20}) {
      const std::string got = cheapest(sample_args(Collective::kReduce, bytes, 2), slow, p)->name;
      if (got != "cma") rec.failures.push_back(fmt::format("lines crossing slowly, reduce of {} B: {}", bytes, got));
    }
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= (std::size_t{64} << 20); bytes *= 4) {
      const std::string got = cheapest(sample_args(Collective::kAllReduce, bytes, 2), fast, p)->name;
      if (got != "shm_direct") {
        rec.failures.push_back(fmt::format("lines crossing fast, all_reduce of {} B: {}", bytes, got));
      }
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("broadcast, scatter and gather on 2 ranks with a core each: single copies (cma) shared by both ranks from "
          "64 KiB (scatter and gather 256 KiB) where lines cross slowly, a latency row below 8 KiB",
          "[collectives][engine]") {
  // Session 29, 2 ranks bound, dcomm-bench --algo all (mean us), cma / the fastest other row / OpenMPI: broadcast 16
  // KiB 2.2 / 3.4 / 1.7-1.9, 64 KiB 3.4 / 3.9-4.1 / 3.9-4.0, 1 MiB 25.6 / 30.1 / 91.8, 16 MiB 900 / 1,053 / 1,758, 64
  // MiB 6.3 / 7.2 / 15.1 ms; 1-4 KiB 2.0-2.1 against the slot's 0.4-0.5. scatter (gather) with the copy of each
  // block shared by the root and its other rank: 64 KiB 3.1 (3.3) / linear 3.6 (4.0) / 3.7 (3.3), 256 KiB 7.6 (8.0)
  // / 10.2 (9.7) / 9.9 (10.6), 16 MiB 1,044-1,124 (1,053-1,056) / 1,274-1,293 (1,261) / 1,408-1,463 (1,469-1,510).
  // broadcast[cma] was by name only before, and scatter[cma] did not exist: the model took binomial, chain or
  // linear there. Where the probe's small pattern is fast, shm_rounds (the test above).
  CostParams p = test::one_node_params();
  p.check_calls = true;  // as the engine prices
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    const GroupView slow = probed_view(node, {true, 181e-6, 296e-6, std::exp2(-33.0)});
    for (Collective coll : {Collective::kBroadcast, Collective::kScatter, Collective::kGather}) {
      // scatter and gather at 64 KiB: linear, since its root copies its own block while the other reads (session
      // 30: scatter 2.3-2.5 us against cma's 3.6-4.4, gather 2.9 against 3.7-4.3).
      const std::size_t from = coll == Collective::kBroadcast ? std::size_t{64} << 10 : std::size_t{256} << 10;
      for (std::size_t bytes = from; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::string got = cheapest(sample_args(coll, bytes, 2), slow, p)->name;
        if (got != "cma") rec.failures.push_back(fmt::format("{} of {} B: {}", to_string(coll), bytes, got));
      }
      if (coll != Collective::kBroadcast) {
        const std::string small = cheapest(sample_args(coll, std::size_t{64} << 10, 2), slow, p)->name;
        if (small != "linear") rec.failures.push_back(fmt::format("{} of 64 KiB: {}", to_string(coll), small));
      }
      for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 10, std::size_t{4} << 10}) {
        const std::string got = cheapest(sample_args(coll, bytes, 2), slow, p)->name;
        if (got == "cma") rec.failures.push_back(fmt::format("{} of {} B: cma", to_string(coll), bytes));
      }
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("the exchange pipes' window reads at the probe's non-temporal price: all_to_all takes cma, not shm_direct, "
          "where that price is high",
          "[collectives][engine]") {
  // Session 29, 2 ranks bound, DCOMM_TUNE=off, the probe's 1 MiB pattern at 181 us with plain stores and 296 us
  // non-temporal: the exchange pipe (all_to_all and reduce_scatter [shm_direct]) stores non-temporal where ranks
  // own their cores, so every byte a rank takes comes from memory; priced at γ alone, the model took
  // all_to_all[shm_direct] at 4-64 MiB, which measured 1.5-1.8x cma's time at 4-16 MiB (4 MiB 580-640 us against
  // 382-398, 16 MiB 2.76-3.04 ms against 1.57-1.68).
  CostParams p = test::one_node_params();
  p.check_calls = true;
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    const GroupView slow = probed_view(node, {true, 181e-6, 296e-6, std::exp2(-33.0)});
    for (std::size_t bytes : {std::size_t{4} << 20, std::size_t{16} << 20}) {
      const std::string got = cheapest(sample_args(Collective::kAllToAll, bytes, 2), slow, p)->name;
      if (got != "cma") rec.failures.push_back(fmt::format("all_to_all of {} B: {}", bytes, got));
      const std::string rs = cheapest(sample_args(Collective::kReduceScatter, bytes, 2), slow, p)->name;
      if (rs == "shm_direct") rec.failures.push_back(fmt::format("reduce_scatter of {} B: shm_direct", bytes));
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}

TEST_CASE("reduce_scatter on 2 ranks with a core each: single copies (cma) from 256 KiB, with plain or non-temporal "
          "window stores as the probe measured them",
          "[collectives][engine]") {
  // Session 30, 2 ranks bound, dcomm-bench --algo all, two runs (mean us), cma / shm_rounds / ring / OpenMPI: 256 KiB
  // 17.1-17.7 / 23.4-39.4 / 40.5-42.2 / 44.6-48.5, 1 MiB 83-90 / 135-150 / 205-210 / 260-273, 4 MiB 415-430 /
  // 603-615 / 935-940 / 1,219-2,463, 16 MiB 1.71-1.90 / 2.72-3.55 / 5.21-5.41 / 12.7-12.8 ms, 64 MiB 12.4-13.5 /
  // 17.5-18.1 / 28.1-28.9 / 52.8-54.0 ms. Before reduce_scatter[cma] the model took shm_rounds there, priced with
  // its window reads past the first 256 KiB free where lines cross slowly (4 MiB priced 133 us).
  CostParams p = test::one_node_params();
  p.check_calls = true;  // as the engine prices
  auto recs = test::run_group(2, [&](const GroupView& node, test::RankRecord& rec) {
    for (const Probed& m : {Probed{true, 181e-6, 296e-6, std::exp2(-33.0)}, Probed{false, 181e-6, 296e-6, 0.0}}) {
      const GroupView v = probed_view(node, m);
      for (std::size_t bytes = std::size_t{256} << 10; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::string got = cheapest(sample_args(Collective::kReduceScatter, bytes, 2), v, p)->name;
        if (got != "cma") {
          rec.failures.push_back(fmt::format("reduce_scatter of {} B (plain stores {}, 1 MiB pattern {} s): {}", bytes,
                                             m.plain, m.plain_seconds, got));
        }
      }
    }
  });
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}
