// Every algorithm of the table against the serial reference, threads as ranks over loopback. The chunk size is
// 64 bytes so that small counts already cross chunk boundaries.

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cost_model.hpp"
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

TEST_CASE("every algorithm handles large vectors", "[collectives][algorithms]") {
  run_world(4, large_cases, "shm", 512 * 1024);
  run_world(3, large_cases, "loopback", 4096);
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

TEST_CASE("shm_direct reuses its windows, grows them, and leaves nothing in /dev/shm", "[collectives][algorithms]") {
  const Algorithm* algo = find_algorithm(Collective::kAllReduce, "shm_direct");
  REQUIRE(algo != nullptr);
  auto cases = [](const Algorithm&, int) {
    CaseList out;
    uint64_t salt = 1;
    // 1100001 float32 is more than one 4 MiB round: the windows stop growing at a round, and the call loops.
    for (std::size_t count : {10u, 30000u, 100u, 70000u, 5u, 1100001u, 70000u, 3u}) {
      Case c;
      c.count = count;
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

TEST_CASE("shm_direct falls back to ring on every rank when a window cannot be created", "[collectives][algorithms]") {
  // A directory where rank 1's first segment would go makes its shm_open fail (and cannot be unlinked).
  std::string blocker = fmt::format("/dev/shm/dcomm-coll-{}-w1-c1-s0", ::getpid());
  REQUIRE(std::filesystem::create_directory(blocker));
  const Algorithm* algo = find_algorithm(Collective::kAllReduce, "shm_direct");
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    test::RankState s{*engine, view, rec};
    for (std::size_t count : {1000u, 10u, 50000u}) {
      Case c;
      c.count = count;
      c.salt = count;
      test::run_case(s, *algo, c);
    }
  });
  std::filesystem::remove(blocker);
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

namespace {

// The rows that pipe pieces through shared-memory windows (collectives/shm_pipe.hpp).
bool piped(const Algorithm& a) {
  return std::string(a.name) == "shm_direct" && !is_reducing(a.collective) && a.collective != Collective::kBarrier;
}

// Counts around a slot (256 KiB: 65536 float32; a block moves in eighths of itself, 16 KiB to a slot) and past a
// lane's ring of slots (4 with a lane per reader, 8 with one lane), every root for one count, in place and not,
// and bytes that end mid-word.
CaseList pipe_cases(const Algorithm& algo, int size) {
  if (!piped(algo)) return {};
  const std::size_t piece = 65536;
  const bool one_lane = algo.collective == Collective::kBroadcast || algo.collective == Collective::kAllGather;
  const std::size_t past_ring = one_lane ? 8 * piece + 3 : 4 * piece + 1;
  auto p = static_cast<std::size_t>(size);
  CaseList out;
  uint64_t salt = 40;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, 3 * p + 1, piece - 1, piece, piece + 1,
                            past_ring, std::size_t{5}}) {
    Case c;
    c.count = count;
    c.in_place = salt % 2 == 0;
    c.root = static_cast<int>(salt % p);
    c.salt = salt++;
    out.push_back(c);
  }
  for (int root = 0; root < size; ++root) {
    Case c;
    c.count = piece + 3;
    c.root = root;
    c.in_place = root % 2 == 1;
    c.salt = salt++;
    out.push_back(c);
  }
  Case bytes;  // int8: pieces and blocks of an odd number of bytes
  bytes.dtype = DType::kInt8;
  bytes.count = 4 * piece + 7;
  bytes.root = size - 1;
  bytes.salt = salt++;
  out.push_back(bytes);
  return out;
}

int pipe_segments_left() {
  int left = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind("dcomm-coll-" + std::to_string(::getpid()) + "-", 0) == 0) ++left;
  }
  return left;
}

}  // namespace

TEST_CASE("the shm_direct pipes match the reference across pieces, rings and roots", "[collectives][algorithms]") {
  int rows = 0;
  for (const Algorithm& a : algorithm_table()) rows += piped(a) ? 1 : 0;
  CHECK(rows == 5);  // broadcast, all_gather, gather, scatter, all_to_all
  // The windows persist per group across the cases: each row's stamps run on from call to call.
  for (int size : {2, 3, 4, 5}) run_world(size, pipe_cases);
  run_world(3, pipe_cases, "shm");
  CHECK(pipe_segments_left() == 0);
}

TEST_CASE("explain prices the shm_direct pipes on a group of one node, and the model picks them for large calls",
          "[collectives][algorithms]") {
  // The built-in one-node parameters, not a probe's, which a loaded machine can skew.
  CostParams builtin;
  builtin.alpha = builtin.alpha_intra = kOneNodeAlpha;
  builtin.beta = builtin.beta_intra = kOneNodeBeta;
  builtin.gamma = kOneNodeGamma;
  const std::string path = fmt::format("/tmp/dcomm_pipe_tuning_{}.json", ::getpid());
  {
    std::ofstream(path) << tuning_json(builtin);
  }
  test::ScopedEnv tuning("DCOMM_TUNING_FILE", path.c_str());
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    for (const Algorithm& algo : algorithm_table()) {
      if (!piped(algo)) continue;
      const std::string text = engine->explain(algo.collective, 16 << 20);
      std::istringstream lines(text);
      bool priced = false;
      for (std::string line; std::getline(lines, line);) {
        if (line.find(" shm_direct ") != std::string::npos && line.find("not for this group") == std::string::npos) {
          priced = true;
        }
      }
      if (!priced) rec.failures.push_back("explain does not price shm_direct: " + text);
      // 16 MiB: the pipe copies at memory speed where the others pay the link's β per byte.
      if (text.find("choice: shm_direct (cost model)") == std::string::npos) {
        rec.failures.push_back("the model does not pick shm_direct at 16 MiB: " + text);
      }
    }
  });
  std::filesystem::remove(path);
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("the shm_direct pipes fall back on every rank when a window cannot be created",
          "[collectives][algorithms]") {
  for (const Algorithm& algo : algorithm_table()) {
    if (!piped(algo)) continue;
    // A directory where rank 1's segment would go (the first call, #0) makes its shm_open fail.
    std::string blocker = fmt::format("/dev/shm/dcomm-coll-{}-w1-c1-s0", ::getpid());
    REQUIRE(std::filesystem::create_directory(blocker));
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      test::RankState s{*engine, view, rec};
      for (std::size_t count : {70000u, 10u, 3u}) {
        Case c;
        c.count = count;
        c.root = static_cast<int>(count % 3);
        c.salt = count;
        test::run_case(s, algo, c);
      }
    });
    std::filesystem::remove(blocker);
    auto failures = test::summarize(records);
    INFO(to_string(algo.collective) << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
  CHECK(pipe_segments_left() == 0);
}

TEST_CASE("a mismatched call to a shm_direct pipe fails on every rank, and the pipe goes on in step",
          "[collectives][algorithms]") {
  for (const Algorithm& algo : algorithm_table()) {
    if (!piped(algo)) continue;
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      test::RankState s{*engine, view, rec};
      Case before;
      before.count = 70001;
      before.root = 1;
      before.salt = 3;
      test::run_case(s, algo, before);  // the windows exist, and the stamps have run on
      // The last rank's count is one larger: every rank must raise before any rank reads a window.
      const std::size_t count = 70001 + (view.rank == 2 ? 1 : 0);
      std::vector<float> send(3 * count, 1.0f), recv(3 * count);
      Args a;
      a.coll = algo.collective;
      a.root = 1;
      const bool whole = algo.collective == Collective::kBroadcast || algo.collective == Collective::kAllToAll;
      a.send = Buffer(send.data(), algo.collective == Collective::kScatter || algo.collective == Collective::kAllToAll
                                       ? 3 * count
                                       : count);
      a.recv = algo.collective == Collective::kBroadcast
                   ? a.send
                   : Buffer(recv.data(), whole || algo.collective == Collective::kAllGather ||
                                                 algo.collective == Collective::kGather
                                             ? 3 * count
                                             : count);
      try {
        engine->run(a, algo.name, Deadline::after(std::chrono::seconds(60)), s.seq++);
        rec.failures.push_back("the mismatched call was not detected");
      } catch (const InvalidUsageError& e) {
        if (std::string(e.what()).find("rank 2") == std::string::npos) {
          rec.failures.push_back(std::string("the error does not name rank 2: ") + e.what());
        }
      }
      Case after = before;
      after.count = 3 * 65536 + 5;
      after.root = 2;
      after.salt = 4;
      test::run_case(s, algo, after);
    });
    auto failures = test::summarize(records);
    INFO(to_string(algo.collective) << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("with the call check off, a shm_direct pipe refuses a piece of another size instead of copying it",
          "[collectives][algorithms]") {
  const Algorithm* algo = find_algorithm(Collective::kBroadcast, "shm_direct");
  REQUIRE(algo != nullptr);
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    EngineOptions opts;
    opts.check_calls = false;
    auto engine = Engine::create(view, opts);
    // Rank 2 asks for one element more than root 0 sends (320 KiB: 8 pieces, which fit the root's ring).
    const std::size_t count = 5 * 16384 + (view.rank == 2 ? 1 : 0);
    std::vector<float> buf(count, view.rank == 0 ? 7.0f : -1.0f);
    Args a;
    a.coll = Collective::kBroadcast;
    a.send = a.recv = Buffer(buf);
    try {
      engine->run(a, algo->name, Deadline::after(std::chrono::seconds(30)), 0);
      if (view.rank == 2) rec.failures.push_back("rank 2 took a block of another size");
      if (view.rank != 2 && buf.back() != 7.0f) rec.failures.push_back("wrong data on a rank whose call matched");
    } catch (const InvalidUsageError& e) {
      if (view.rank != 2 || std::string(e.what()).find("rank 0 published piece 1 of a 320.0 KiB block") ==
                                std::string::npos) {
        rec.failures.push_back(std::string("unexpected error: ") + e.what());
      }
    }
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("a stuck peer fails a shm_direct pipe by its deadline, naming the op, the peer, the piece and its bytes",
          "[collectives][algorithms]") {
  // With the call check off, rank `absent` skips the call after the windows exist: the other waits in the pipe
  // itself - the root for an acknowledgement once its ring is full (broadcast), a reader for a piece (all_gather).
  struct Stuck {
    Collective coll;
    int absent;
    const char* awaited;
  };
  for (const Stuck& stuck : {Stuck{Collective::kBroadcast, 1, "rank 1's acknowledgement of an earlier piece"},
                             Stuck{Collective::kAllGather, 0, "piece 1 of 8 (72.0 KiB of a 576.0 KiB block) in rank 0's"}}) {
    const Algorithm* algo = find_algorithm(stuck.coll, "shm_direct");
    REQUIRE(algo != nullptr);
    std::atomic<bool> over{false};
    auto records = test::run_group(2, [&](const GroupView& view, test::RankRecord& rec) {
      EngineOptions opts;
      opts.check_calls = false;
      auto engine = Engine::create(view, opts);
      // broadcast: 9 pieces from rank 0, one more than its ring holds; all_gather: 8 pieces of each block.
      const std::size_t count = stuck.coll == Collective::kBroadcast ? 9 * 65536 : 3 * 49152;
      std::vector<float> send(count, 1.0f + static_cast<float>(view.rank)), recv(2 * count);
      Args a;
      a.coll = stuck.coll;
      a.send = Buffer(send);
      a.recv = stuck.coll == Collective::kBroadcast ? a.send : Buffer(recv);
      engine->run(a, algo->name, Deadline::after(std::chrono::seconds(60)), 0);  // makes the windows
      if (view.rank == stuck.absent) {
        for (int i = 0; i < 1000 && !over.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      try {
        engine->run(a, algo->name, Deadline::after(std::chrono::milliseconds(1500)), 1);
        rec.failures.push_back("the call finished without its peer");
      } catch (const Error& e) {
        std::string w = e.what();
        for (std::string want : {fmt::format("{}[shm_direct] rank {}/2", to_string(stuck.coll), view.rank),
                                 std::string(stuck.awaited), std::string("call #1 of this group"),
                                 std::string("(timeout 1.5 s)"), fmt::format("rank {} (pid", stuck.absent)}) {
          if (w.find(want) == std::string::npos) rec.failures.push_back("error lacks '" + want + "': " + w);
        }
        if (e.code() != ErrorCode::kTimeout) rec.failures.push_back("not a timeout: " + w);
      }
      over = true;
    });
    auto failures = test::summarize(records);
    INFO(to_string(stuck.coll) << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("hierarchical algorithms match the reference on simulated nodes", "[collectives][algorithms][hier]") {
  for (const auto& nodes : kPlacements) {
    const int size = static_cast<int>(nodes.size());
    run_world(size, hier_only(sweep_cases), "loopback", 64, nodes);
    run_world(size, hier_only(matrix_cases), "loopback", 64, nodes);
  }
  // shm completes sends asynchronously: a buffer reused too early shows here.
  run_world(4, hier_only(sweep_cases), "shm", 64, kPlacements[0]);
  run_world(4, hier_only(large_cases), "shm", 4096, kPlacements[3]);
  run_world(7, hier_only(large_cases), "loopback", 4096, kPlacements[4]);
  // Without the call check the phases start at once, so calls follow each other more closely.
  test::ScopedEnv unchecked("DCOMM_CHECK_CALLS", "0");
  run_world(4, hier_only(sweep_cases), "shm", 64, kPlacements[3]);
}
