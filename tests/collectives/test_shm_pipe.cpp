// The shm_direct rows of broadcast, all_gather, gather, scatter, all_to_all and reduce_scatter (shm_pipe.hpp), threads
// as ranks: against the serial reference around pieces, rings and every root at P = 2..5 (every row also runs in
// test_algorithms.cpp's sweeps over P = 1..9), their fallback when a window cannot be made, a mismatched call, a
// piece of another size with the check off, a stuck peer's error, and what explain() and the model say; and the
// fallback of every shm_direct row (all_reduce and reduce too) when a window cannot be made.

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "collectives/cost_model.hpp"
#include "collectives/registry.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/topology.hpp"
#include "collectives/validate.hpp"
#include "tests/collectives/cases.hpp"

using namespace dcomm;
using namespace dcomm::coll;
using dcomm::test::Case;

namespace {

using CaseList = std::vector<Case>;

// The rows that pipe pieces through shared-memory windows (collectives/shm_pipe.hpp).
bool piped(const Algorithm& a) {
  return (std::string(a.name) == "shm_direct" && a.collective != Collective::kAllReduce &&
          a.collective != Collective::kReduce) ||
         std::string(a.name) == "shm_pipe";
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

// Every pipe row's cases on one group of `size` ranks, in turn: the windows persist per group across the cases,
// so each row's stamps run on from call to call. `shared_cores`: the group's placement says ranks share cores, so
// the rows whose busiest rank reads (gather, reduce, reduce_scatter, all_to_all) fill their slots with plain stores,
// and the rows with a lane per reader move blocks in whole pieces up to the slot.
void run_pipes(int size, const std::string& transport, bool shared_cores = false) {
  auto records = test::run_group(
      size,
      [&](const GroupView& node, test::RankRecord& rec) {
        const GroupView view = test::with_topology(node, [&](Topology& t) { t.shares_cores = shared_cores; });
        auto engine = Engine::create(view);
        test::RankState s{*engine, view, rec};
        for (const Algorithm& algo : algorithm_table()) {
          if (!piped(algo)) continue;
          for (const Case& c : pipe_cases(algo, size)) test::run_case(s, algo, c);
        }
      },
      transport);
  auto failures = test::summarize(records);
  INFO(transport << " P=" << size << ", " << failures.size() << " failures; first: "
                 << (failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

}  // namespace

TEST_CASE("the shm_direct pipes match the reference across pieces, rings and roots", "[collectives][algorithms]") {
  int rows = 0;
  for (const Algorithm& a : algorithm_table()) rows += piped(a) ? 1 : 0;
  CHECK(rows == 7);  // broadcast, all_gather, gather, scatter, all_to_all, reduce_scatter; reduce[shm_pipe]
  for (int size : {2, 3, 4, 5}) run_pipes(size, "loopback");
  run_pipes(3, "shm");
  // Plain stores into the slots where ranks share cores (reader_bound_stores), the same results.
  for (int size : {3, 4}) run_pipes(size, "loopback", /*shared_cores=*/true);
  run_pipes(3, "shm", /*shared_cores=*/true);
  CHECK(pipe_segments_left() == 0);
}

TEST_CASE("the pipes whose busiest rank reads take plain stores where ranks share cores, non-temporal elsewhere",
          "[collectives][algorithms]") {
  for (bool shared : {false, true}) {
    const GroupView view = test::with_topology(test::fake_view(0, 4), [&](Topology& t) { t.shares_cores = shared; });
    Args a;
    a.coll = Collective::kReduce;
    Context c(a, view, test::soon(), 0, "test", 0);
    INFO("shares_cores " << shared);
    CHECK(reader_bound_stores(c) == (shared ? PipeStores::kPlain : PipeStores::kStream));
  }
  // Without a placement (no hierarchy) nothing says cores are shared.
  Args a;
  a.coll = Collective::kGather;
  Context c(a, test::fake_view(0, 4), test::soon(), 0, "test", 0);
  CHECK(reader_bound_stores(c) == PipeStores::kStream);
}

TEST_CASE("where ranks share cores a pipe with a lane per reader moves a block in as few pieces as its slot allows",
          "[collectives][algorithms]") {
  const std::size_t kib = 1024;
  // Eighths of the block (at least 16 KiB) where ranks have cores of their own, and always with one lane.
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 4, 64 * kib, false) == 4);
  CHECK(pipe_pieces(PipeLanes::kOne, 4, 64 * kib, true) == 4);
  CHECK(pipe_pieces(PipeLanes::kOne, 3, 1024 * kib, true) == 8);
  // Whole blocks up to the slot (256 KiB with a lane per reader on 3 or 4 ranks), then slots.
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 4, 64 * kib, true) == 1);
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 3, 1, true) == 1);
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 3, 256 * kib, true) == 1);
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 3, 1024 * kib + 1, true) == 5);
  CHECK(pipe_pieces(PipeLanes::kPerPeer, 4, 1024 * kib, false) == 8);
}

TEST_CASE("explain prices the shm pipes on a group of one node, and the model picks them for large calls",
          "[collectives][algorithms]") {
  // The built-in one-node parameters, not a probe's, which a loaded machine can skew.
  const CostParams builtin = test::one_node_params();
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
        if (line.find(fmt::format(" {} ", algo.name)) != std::string::npos &&
            line.find("not for this group") == std::string::npos) {
          priced = true;
        }
      }
      if (!priced) rec.failures.push_back(fmt::format("explain does not price {}: {}", algo.name, text));
      // 16 MiB: the pipe copies at memory speed where the others pay the link's β per byte.
      if (text.find(fmt::format("choice: {} (cost model)", algo.name)) == std::string::npos) {
        rec.failures.push_back(fmt::format("the model does not pick {} at 16 MiB: {}", algo.name, text));
      }
    }
  });
  std::filesystem::remove(path);
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("every shm_direct row falls back on every rank when a window cannot be created",
          "[collectives][algorithms]") {
  // all_reduce and reduce (shm_rounds) as well as the pipes: they share the windows' setup (open_windows).
  for (const Algorithm& algo : algorithm_table()) {
    if (std::string(algo.name) != "shm_direct" && !piped(algo)) continue;
    // A directory where rank 1's segment would go (the first call, #0) makes its shm_open fail.
    std::string blocker = fmt::format("/dev/shm/dcomm-coll-{}-w1-c1-s0", ::getpid());
    REQUIRE(std::filesystem::create_directory(blocker));
    auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      test::RankState s{*engine, view, rec};
      for (std::size_t count : {70000u, 10u, 3u, 50000u}) {
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
      const bool spread = algo.collective == Collective::kScatter || algo.collective == Collective::kAllToAll ||
                          algo.collective == Collective::kReduceScatter;
      a.send = Buffer(send.data(), spread ? 3 * count : count);
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

