// Every algorithm of the table against the serial reference, threads as ranks over loopback. The chunk size is
// 64 bytes so that small counts already cross chunk boundaries.

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/registry.hpp"
#include "collectives/validate.hpp"
#include "tests/collectives/cases.hpp"

using namespace dcomm;
using namespace dcomm::coll;
using dcomm::test::Case;

namespace {

using CaseList = std::vector<Case>;
using CaseFn = std::function<CaseList(const Algorithm& algo, int size)>;

// Runs every algorithm's cases on a world of `size` ranks and checks the ranks' records on the main thread.
// `nodes`: rank r on simulated node nodes[r] (empty: one node).
void run_world(int size, const CaseFn& cases, const std::string& transport = "loopback", std::size_t chunk = 64,
               const std::vector<int>& nodes = {}) {
  auto records = test::run_group(
      size,
      [&](const GroupView& view, test::RankRecord& rec) {
        EngineOptions opts;
        opts.chunk_bytes = chunk;
        auto engine = Engine::create(view, opts);
        test::RankState s{*engine, view, rec};
        for (const Algorithm& algo : algorithm_table()) {
          for (const Case& c : cases(algo, size)) test::run_case(s, algo, c);
        }
      },
      transport, nodes);
  auto failures = test::summarize(records);
  INFO(transport << " world size " << size << (nodes.empty() ? "" : " on simulated nodes") << ", " << failures.size()
                 << " failures; first: " << (failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

bool reducing(const Algorithm& a) { return is_reducing(a.collective); }

CaseList sweep_cases(const Algorithm& algo, int size) {
  CaseList out;
  if (algo.collective == Collective::kBarrier) return {Case{}};
  auto p = static_cast<std::size_t>(size);
  uint64_t salt = 1;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, 3 * p + 1, std::size_t{37}}) {
    for (bool in_place : {false, true}) {
      Case c;
      c.count = count;
      c.in_place = in_place;
      c.root = static_cast<int>(count % p);
      c.salt = salt++;
      out.push_back(c);
      c.dtype = reducing(algo) ? DType::kInt32 : DType::kInt8;
      c.salt = salt++;
      out.push_back(c);
    }
  }
  if (reducing(algo)) {
    std::pair<DType, Reduction> more[] = {{DType::kInt32, ReduceOp::kMax},
                                          {DType::kFloat64, ReduceOp::kAvg},
                                          {DType::kFloat32, Reduction(ReduceOp::kPreMulSum, 0.25)},
                                          {DType::kUInt8, ReduceOp::kBXor}};
    for (auto& [t, red] : more) {
      Case c;
      c.dtype = t;
      c.red = red;
      c.count = 3 * p + 1;
      c.root = size - 1;
      c.salt = salt++;
      out.push_back(c);
    }
  }
  Args probe;
  probe.coll = algo.collective;
  probe.vector_variant = true;
  if (algo.collective != Collective::kAllGather && algo.collective != Collective::kReduceScatter && !reducing(algo) &&
      algo.collective != Collective::kBroadcast && algo.supports(probe, GroupView{})) {
    for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{8}}) {
      Case c;
      c.count = count;
      c.vector_variant = true;
      c.root = size / 2;
      c.salt = salt++;
      out.push_back(c);
    }
  }
  return out;
}

// A large odd count per algorithm: many pipelined pieces, large messages.
CaseList large_cases(const Algorithm& algo, int size) {
  if (algo.collective == Collective::kBarrier) return {};
  Case c;
  c.count = algo.collective == Collective::kAllReduce || algo.collective == Collective::kBroadcast ||
                    algo.collective == Collective::kReduce
                ? 200001
                : 40001;
  c.root = size - 1;
  c.salt = 7;
  return {c};
}

// Counts over several pipeline segments of all_reduce[hier] at a 64-byte chunk (a segment is 2 chunks per ring
// block: 2·N·L chunks), odd and not divisible by the ranks, in place and not.
CaseList segment_cases(const Algorithm& algo, int size) {
  if (algo.collective == Collective::kBarrier) return {};
  CaseList cases;
  for (std::size_t count : {std::size_t{1001}, 2 * std::size_t{384} + 1}) {
    for (bool in_place : {false, true}) {
      Case c;
      c.count = count;
      c.in_place = in_place;
      c.root = size / 2;
      c.salt = 11;
      cases.push_back(c);
    }
  }
  return cases;
}

// Every dtype with every op that fits it (reducing collectives), or every dtype (the others).
CaseList matrix_cases(const Algorithm& algo, int size) {
  CaseList out;
  if (algo.collective == Collective::kBarrier) return out;
  uint64_t salt = 100;
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!op_fits_dtype(op, t)) continue;
      if (!reducing(algo) && op != ReduceOp::kSum) continue;
      Case c;
      c.dtype = t;
      c.red = op == ReduceOp::kPreMulSum ? Reduction(op, 0.5) : Reduction(op);
      c.count = 13;
      c.in_place = (salt % 2) == 0;
      c.root = size - 1;
      c.salt = salt++;
      out.push_back(c);
    }
  }
  return out;
}

// Only the hierarchical rows' cases (the flat ones run on one node above).
CaseFn hier_only(const CaseFn& cases) {
  return [cases](const Algorithm& algo, int size) {
    return algo.supports == &supports_hier ? cases(algo, size) : CaseList{};
  };
}

// Simulated placements: rank r on node nodes[r]. 2 x 2, 3 x 2, 2 x 3, uneven 3 + 1, and uneven nodes whose ranks
// interleave (so that no step may assume a node's ranks are consecutive).
const std::vector<std::vector<int>> kPlacements = {
    {0, 0, 1, 1}, {0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1, 1}, {0, 0, 0, 1}, {0, 1, 1, 0, 2, 1, 1}};

}  // namespace

TEST_CASE("every algorithm matches the reference on world sizes 1 to 9", "[collectives][algorithms]") {
  for (int size = 1; size <= 9; ++size) run_world(size, sweep_cases);
}

TEST_CASE("every algorithm matches the reference over shared memory", "[collectives][algorithms]") {
  // shm completes sends asynchronously and moves large messages in pieces: buffer reuse bugs show here.
  for (int size : {2, 3, 5, 8}) run_world(size, sweep_cases, "shm");
}

TEST_CASE("the cma rows without shared-memory slots: addresses and the last round by messages",
          "[collectives][algorithms]") {
  // With slots (every one-node group above) the addresses and the finishing round go through them; without, on
  // the call check's rounds and by messages (collectives/cma_peers.hpp).
  test::ScopedEnv off("DCOMM_SLOTS", "0");
  auto cma_rows = [](const Algorithm& algo, int size) {
    return std::string(algo.name) == "cma" ? sweep_cases(algo, size) : CaseList{};
  };
  for (int size : {2, 3, 4}) run_world(size, cma_rows, "shm");
  run_world(5, cma_rows);
}

namespace {

// The rows that move data through the shared-memory windows in rounds (collectives/shm_rounds.hpp).
bool in_rounds(const Algorithm& algo) {
  const std::string name = algo.name;
  return (name == "shm_direct" && (algo.collective == Collective::kAllReduce || algo.collective == Collective::kReduce)) ||
         name == "shm_rounds";  // all_gather, all_to_all, broadcast
}

}  // namespace

TEST_CASE("all_reduce, reduce [shm_direct], all_gather, all_to_all, broadcast, gather, scatter and reduce_scatter "
          "[shm_rounds] match the reference with plain and non-temporal window stores",
          "[collectives][algorithms]") {
  const char* cached = GENERATE("1", "0");
  test::ScopedEnv forced("DCOMM_SHM_CACHED", cached);
  INFO("DCOMM_SHM_CACHED=" << cached);
  auto shm_rounds_rows = [](const Algorithm& algo, int size) {
    return in_rounds(algo) ? sweep_cases(algo, size) : CaseList{};
  };
  for (int size : {2, 3, 5}) run_world(size, shm_rounds_rows, "shm");
  // Vectors over several rounds of either size (1 MiB, 4 MiB: all_gather's a rank's share of them, so a block of
  // 300007 float32 takes 4 rounds of plain stores on 3 ranks, 1 of non-temporal ones, and 1100001 takes 13 and 4;
  // all_to_all's parts are half as large again on 3 ranks),
  // odd counts, in place and not, a root that is not rank 0, doubles and int8 (a round holds a whole number of
  // elements of either), on 3 ranks.
  auto large_rows = [](const Algorithm& algo, int size) {
    CaseList out;
    if (!in_rounds(algo)) return out;
    uint64_t salt = 31;
    for (std::size_t count : {std::size_t{300007}, std::size_t{1100001}}) {
      for (bool in_place : {false, true}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt8}) {
          Case c;
          c.count = count;
          c.in_place = in_place;
          c.dtype = dtype;
          c.red.op = dtype == DType::kInt8 ? ReduceOp::kMax : ReduceOp::kSum;
          c.root = size - 1;
          c.salt = salt++;
          out.push_back(c);
        }
      }
    }
    return out;
  };
  run_world(3, large_rows, "shm", 512 * 1024);
}

TEST_CASE("every algorithm handles large vectors", "[collectives][algorithms]") {
  run_world(4, large_cases, "shm", 512 * 1024);
  run_world(3, large_cases, "loopback", 4096);
}

TEST_CASE("all_gather[ring] in place sends its own block from where nothing lands while it is read",
          "[collectives][algorithms]") {
  // In place, the input lies at the output's start, where another rank's block lands in the ring's first round,
  // while the next rank may still be reading this rank's own block: a single copy reads when the receiver gets to
  // it. Sent from there, 6 of 30 runs of the tuner's every-collective test got block 0 in another's place (session
  // 32); the ring sends from `send` only where it lies apart from `recv`.
  auto ring_in_place = [](const Algorithm& algo, int size) {
    CaseList out;
    if (algo.collective != Collective::kAllGather || std::string(algo.name) != "ring") return out;
    uint64_t salt = 1;
    for (int round = 0; round < 20; ++round) {
      for (std::size_t count : {std::size_t{7777}, 3 * static_cast<std::size_t>(size) + 1, std::size_t{20000}}) {
        Case c;
        c.count = count;
        c.in_place = round % 4 != 3;  // and out of place now and then
        c.salt = salt++;
        out.push_back(c);
      }
    }
    return out;
  };
  for (int size : {3, 4}) {
    run_world(size, ring_in_place, "shm", std::size_t{1} << 20);  // one piece a block: read by single copies
    run_world(size, ring_in_place, "loopback", std::size_t{1} << 20);
  }
}

TEST_CASE("every algorithm handles every dtype and op", "[collectives][algorithms]") {
  run_world(3, matrix_cases);
  run_world(4, matrix_cases);
}

TEST_CASE("barrier holds every rank until all have arrived", "[collectives][algorithms]") {
  for (int size : {2, 3, 5}) {
    std::atomic<int> arrived{0};
    auto records = test::run_group(size, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      for (int round = 0; round < 3; ++round) {
        arrived.fetch_add(1);
        Args a;
        a.coll = Collective::kBarrier;
        engine->run(a, "dissemination", Deadline::after(std::chrono::seconds(60)), static_cast<uint64_t>(round));
        if (arrived.load() < (round + 1) * size) rec.failures.push_back("left the barrier before every rank arrived");
        engine->run(a, "dissemination", Deadline::after(std::chrono::seconds(60)), static_cast<uint64_t>(100 + round));
      }
    });
    auto failures = test::summarize(records);
    CHECK(failures.empty());
  }
}

TEST_CASE("the shared-memory rounds reuse their windows, grow them, and leave nothing in /dev/shm",
          "[collectives][algorithms]") {
  // Both ways of filling the windows (collectives/window_probe.hpp): plain stores in rounds of 1 MiB, non-temporal
  // ones in rounds of 4 MiB. The group's probe chooses one on this machine; each is forced here in turn.
  const char* cached = GENERATE("1", "0");
  test::ScopedEnv forced("DCOMM_SHM_CACHED", cached);
  const char* row = GENERATE("all_reduce[shm_direct]", "all_gather[shm_rounds]", "all_to_all[shm_rounds]",
                             "broadcast[shm_rounds]", "gather[shm_rounds]", "scatter[shm_rounds]",
                             "reduce_scatter[shm_rounds]");
  INFO("DCOMM_SHM_CACHED=" << cached << ", " << row);
  const std::string name = row;
  const Algorithm* algo = name == "all_reduce[shm_direct]"   ? find_algorithm(Collective::kAllReduce, "shm_direct")
                          : name == "all_gather[shm_rounds]" ? find_algorithm(Collective::kAllGather, "shm_rounds")
                          : name == "all_to_all[shm_rounds]" ? find_algorithm(Collective::kAllToAll, "shm_rounds")
                          : name == "broadcast[shm_rounds]"  ? find_algorithm(Collective::kBroadcast, "shm_rounds")
                          : name == "gather[shm_rounds]"     ? find_algorithm(Collective::kGather, "shm_rounds")
                          : name == "scatter[shm_rounds]"    ? find_algorithm(Collective::kScatter, "shm_rounds")
                                                             : find_algorithm(Collective::kReduceScatter, "shm_rounds");
  REQUIRE(algo != nullptr);
  auto cases = [](const Algorithm&, int) {
    CaseList out;
    uint64_t salt = 1;
    // 1100001 float32 is more than one 4 MiB round (four 1 MiB rounds and a bit): the windows stop growing at a
    // round, and the call loops; 300007 is just past one 1 MiB round.
    for (std::size_t count : {10u, 30000u, 100u, 70000u, 5u, 1100001u, 70000u, 3u, 300007u}) {
      Case c;
      c.count = count;
      c.root = static_cast<int>(salt % 3);  // broadcast: roots change from call to call
      c.salt = salt++;
      out.push_back(c);
    }
    return out;
  };
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    test::RankState s{*engine, view, rec};
    for (const Case& c : cases(*algo, 3)) test::run_case(s, *algo, c);
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
  int left = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind("dcomm-coll-" + std::to_string(::getpid()) + "-", 0) == 0) ++left;
  }
  CHECK(left == 0);
}

TEST_CASE("hierarchical algorithms match the reference on simulated nodes", "[collectives][algorithms][hier]") {
  for (const auto& nodes : kPlacements) {
    const int size = static_cast<int>(nodes.size());
    run_world(size, hier_only(sweep_cases), "loopback", 64, nodes);
    run_world(size, hier_only(matrix_cases), "loopback", 64, nodes);
    run_world(size, hier_only(segment_cases), "loopback", 64, nodes);
  }
  // shm completes sends asynchronously: a buffer reused too early shows here.
  run_world(4, hier_only(sweep_cases), "shm", 64, kPlacements[0]);
  run_world(4, hier_only(large_cases), "shm", 4096, kPlacements[3]);
  run_world(7, hier_only(large_cases), "loopback", 4096, kPlacements[4]);
  // Without the call check the phases start at once, so calls follow each other more closely.
  test::ScopedEnv unchecked("DCOMM_CHECK_CALLS", "0");
  run_world(4, hier_only(sweep_cases), "shm", 64, kPlacements[3]);
}
