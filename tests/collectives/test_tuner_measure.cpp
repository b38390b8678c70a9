// The tuner's measurement itself (measure_algorithms, collectives/tuner.cpp) with fake runs on one rank: how many
// calls a pass times where ranks share cores and which rows it leaves out, a row's calls timed together (a loop's
// pace, not a call's median), and the margin within which the model's row is kept.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <map>
#include <string>
#include <vector>

#include "collectives/registry.hpp"
#include "collectives/tuner.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

TEST_CASE("where ranks share cores the tuner times 4x the calls from 256 KiB and leaves out only a row 10x the "
          "fastest",
          "[collectives][tuner]") {
  // One rank's measurement with a fake run: every row takes 300 us a call but `ring`, 6x that. Ranks sharing
  // cores make one call's time say little of a row's pace in a loop (session 17): there no row is left out below
  // 10x, and each pass times 4x the calls (12 at 1 MiB, at least the 16 every row runs up to 256 KiB).
  const Algorithm* model = nullptr;
  for (const Algorithm& a : algorithm_table()) {
    if (a.collective == Collective::kAllReduce && std::string(a.name) == "ring") model = &a;
  }
  REQUIRE(model != nullptr);
  auto spin = [](std::chrono::microseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  TuneCall run = [&](const Args&, const std::string& algorithm) {
    if (algorithm.empty()) return;  // the agreements between ranks: one rank here
    spin(std::chrono::microseconds(algorithm == "ring" ? 1800 : 300));
  };
  std::vector<float> x(std::size_t{256} << 10, 1.0f);  // 1 MiB: 3 calls a pass, 2 passes
  Args call;
  call.coll = Collective::kAllReduce;
  call.send = call.recv = Buffer(x.data(), x.size());
  for (bool shared : {false, true}) {
    const GroupView view = test::with_topology(test::placed_view({"h", "h", "h", "h"}),
                                               [&](Topology& t) { t.shares_cores = shared; });
    const TuneResult r = measure_algorithms(call, view, *model, 7, run);
    INFO("shares_cores " << shared << ": " << r.how);
    CHECK(r.algorithm != "ring");
    CHECK(r.how.find(shared ? "2 runs of 12 calls" : "2 runs of 3 calls") != std::string::npos);
    CHECK((r.how.find("ring left out") != std::string::npos) == !shared);
  }
}

TEST_CASE("the tuner times a row's calls together: its pace in a loop, not its median call", "[collectives][tuner]") {
  // A fake run, one rank: `tree` takes 100 us a call but every 4th, 1000 us (325 a call in a loop); every other
  // row 250 us. The median of single calls (before session 19) chose tree; its pace is the slower. (2 ranks bound,
  // gather of 64 KiB: linear's single calls measured 4.7-7.2 us, its pace in a loop 3.1-3.6; shm_direct 5.9 both.)
  const Algorithm* model = nullptr;
  for (const Algorithm& a : algorithm_table()) {
    if (a.collective == Collective::kAllReduce && std::string(a.name) == "ring") model = &a;
  }
  REQUIRE(model != nullptr);
  std::map<std::string, int> calls;
  TuneCall run = [&](const Args&, const std::string& algorithm) {
    if (algorithm.empty()) return;  // the agreements between ranks: one rank here
    const bool slow = algorithm == "tree" && ++calls[algorithm] % 4 == 0;
    const auto d = std::chrono::microseconds(algorithm == "tree" ? (slow ? 1000 : 100) : 250);
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  std::vector<float> x(std::size_t{16} << 10, 1.0f);  // 64 KiB: 16 calls a pass
  Args call;
  call.coll = Collective::kAllReduce;
  call.send = call.recv = Buffer(x.data(), x.size());
  const GroupView view = test::with_topology(test::placed_view({"h", "h"}), [](Topology& t) { t.shares_cores = false; });
  const TuneResult r = measure_algorithms(call, view, *model, 7, run);
  INFO(r.how);
  CHECK(r.algorithm != "tree");
  CHECK(r.how.find("2 runs of 16 calls") != std::string::npos);
}

TEST_CASE("where ranks share cores the model's row is kept only within 2% of the fastest, elsewhere within 10%",
          "[collectives][tuner]") {
  // One rank's measurement with a fake run: the model's row (ring) 290 us a call, butterfly 272 (6% faster, after ring in the table), every other
  // row 900. With cores of their own the model's choice stays; where ranks share cores the model prices on built-in
  // parameters and a measured gap of 5-9% was 17-40% in a loop (tuner.cpp): butterfly. Both keep the tie rule's order.
  const Algorithm* model = nullptr;
  for (const Algorithm& a : algorithm_table()) {
    if (a.collective == Collective::kAllReduce && std::string(a.name) == "ring") model = &a;
  }
  REQUIRE(model != nullptr);
  TuneCall run = [&](const Args&, const std::string& algorithm) {
    if (algorithm.empty()) return;  // the agreements between ranks: one rank here
    const int us = algorithm == "ring" ? 290 : algorithm == "butterfly" ? 272 : 900;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  std::vector<float> x(std::size_t{16} << 10, 1.0f);  // 64 KiB: 16 calls a pass
  Args call;
  call.coll = Collective::kAllReduce;
  call.send = call.recv = Buffer(x.data(), x.size());
  for (bool shared : {false, true}) {
    const GroupView view = test::with_topology(test::placed_view({"h", "h", "h"}),
                                               [&](Topology& t) { t.shares_cores = shared; });
    const TuneResult r = measure_algorithms(call, view, *model, 7, run);
    INFO("shares_cores " << shared << ": " << r.how);
    CHECK(r.algorithm == (shared ? "butterfly" : "ring"));
    if (!shared) CHECK(r.how.find("ring kept: within 10% of the fastest") != std::string::npos);
  }
}

TEST_CASE("the tuner measures on memory at the same offset within a page as the call's buffers", "[collectives][tuner]") {
  // A single copy pins and copies page by page: all_to_all[cma] of 64 KiB measured 4.4-4.7 us a call on the tuner's
  // malloc'd buffers (16 bytes into a page) against 3.9-4.3 page-aligned, as the caller's (dcomm-bench's) were.
  const Algorithm* model = nullptr;
  for (const Algorithm& a : algorithm_table()) {
    if (a.collective == Collective::kAllReduce && std::string(a.name) == "ring") model = &a;
  }
  REQUIRE(model != nullptr);
  constexpr std::size_t kPage = 4096;
  constexpr std::size_t kCount = std::size_t{16} << 10;  // 64 KiB of floats
  char* base = static_cast<char*>(std::aligned_alloc(kPage, 4 * kPage + 2 * kCount * sizeof(float)));
  REQUIRE(base != nullptr);
  for (std::size_t send_at : {std::size_t{0}, std::size_t{16}, std::size_t{1024}}) {
    const std::size_t recv_at = (send_at + 64) % kPage;
    float* send = reinterpret_cast<float*>(base + send_at);
    float* recv = reinterpret_cast<float*>(base + 2 * kPage + kCount * sizeof(float) + recv_at);
    std::vector<std::pair<std::size_t, std::size_t>> seen;
    TuneCall run = [&](const Args& a, const std::string& algorithm) {
      if (algorithm.empty()) return;  // the agreements between ranks: one rank here
      seen.emplace_back(reinterpret_cast<uintptr_t>(a.send.data) % kPage, reinterpret_cast<uintptr_t>(a.recv.data) % kPage);
    };
    Args call;
    call.coll = Collective::kAllReduce;
    call.send = Buffer(send, kCount);
    call.recv = Buffer(recv, kCount);
    const GroupView view = test::with_topology(test::placed_view({"h", "h"}), [](Topology& t) { t.shares_cores = false; });
    (void)measure_algorithms(call, view, *model, 7, run);
    INFO("send at " << send_at << ", recv at " << recv_at);
    REQUIRE_FALSE(seen.empty());
    for (const auto& [s, r] : seen) {
      CHECK(s == send_at);
      CHECK(r == recv_at);
    }
  }
  std::free(base);
}
