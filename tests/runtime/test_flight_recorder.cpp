// The flight recorder's ring and dumps, without any ranks: what it keeps, where it says the rank is, and the
// JSON and text a dump has (docs/errors.md).

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "runtime/flight_recorder.hpp"

using namespace dcomm;
using dcomm::runtime::FlightRecorder;
using dcomm::runtime::FlightRecorders;
using dcomm::runtime::dump_text;

TEST_CASE("the flight recorder keeps the last N calls, oldest first, and says where the rank is", "[flight]") {
  ::setenv("DCOMM_FLIGHT_RECORDER_ENTRIES", "3", 1);
  FlightRecorders all;
  auto g = all.add(5, {0, 2, 4});
  ::unsetenv("DCOMM_FLIGHT_RECORDER_ENTRIES");
  CHECK_FALSE(g->position(Clock::now()).any);
  static const char* kRing = "ring";
  for (uint64_t seq = 10; seq < 15; ++seq) {
    g->begin(seq, Collective::kAllReduce, DType::kFloat32, 1000 + seq, 0, Clock::now());
    g->algorithm_slot()->store(kRing);
    g->end(seq != 13);
  }
  g->begin(15, Collective::kBroadcast, DType::kInt64, 7, 2, Clock::now());
  auto pos = g->position(Clock::now());
  CHECK((pos.any && pos.in_call && pos.newest.seq == 15 && pos.newest.coll == Collective::kBroadcast));

  nlohmann::json d = all.dump(2, 6);
  REQUIRE(d["groups"].size() == 1);
  const auto& grp = d["groups"][0];
  CHECK(grp["context"] == 5);
  CHECK(grp["ranks"] == nlohmann::json({0, 2, 4}));
  CHECK(grp["in_call"] == true);
  const auto& e = grp["entries"];
  REQUIRE(e.size() == 3);  // 13, 14, 15: the ring keeps three
  CHECK((e[0]["seq"] == 13 && e[0]["state"] == "failed" && e[0]["algorithm"] == "ring" && e[0]["count"] == 1013));
  CHECK((e[1]["seq"] == 14 && e[1]["state"] == "done" && e[1]["dtype"] == "float32"));
  CHECK((e[2]["seq"] == 15 && e[2]["state"] == "running" && e[2]["collective"] == "broadcast" && e[2]["root"] == 2));

  std::string text = dump_text(d);
  INFO(text);
  CHECK(text.find("dcomm flight recorder: rank 2/6") == 0);
  CHECK(text.find("group 5 (world ranks [0,2,4]): in broadcast #15") != std::string::npos);
  CHECK(text.find("#14 all_reduce[ring] float32 x 1014 root 0: done") != std::string::npos);

  g->end(true);
  pos = g->position(Clock::now());
  CHECK((!pos.in_call && pos.newest.seq == 15));
  CHECK(dump_text(all.dump(2, 6)).find("last finished broadcast #15, in user code for") != std::string::npos);
  g.reset();
  CHECK(all.dump(2, 6)["groups"].size() == 1);  // a destroyed group stays in the dumps (at exit, say)
}

TEST_CASE("a dump read while the group records calls sees whole entries in order", "[flight]") {
  // The writer takes no lock: each entry has its own stamp, and a reader retries a copy the writer changed under
  // it. Every entry read must be one call's (count, root and dtype all derived from its seq), in order.
  ::setenv("DCOMM_FLIGHT_RECORDER_ENTRIES", "4", 1);
  FlightRecorders all;
  auto g = all.add(1, {0, 1});
  ::unsetenv("DCOMM_FLIGHT_RECORDER_ENTRIES");
  static const char* kAlgo = "slot";
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    for (uint64_t seq = 1; !stop.load(std::memory_order_relaxed); ++seq) {
      g->begin(seq, seq % 2 ? Collective::kAllReduce : Collective::kBroadcast,
               seq % 3 ? DType::kFloat32 : DType::kInt64, seq * 7 + 3, static_cast<int>(seq % 5), Clock::now());
      g->algorithm_slot()->store(kAlgo);
      g->end(seq % 11 != 0);
      written.store(seq, std::memory_order_relaxed);
    }
  });
  std::vector<std::string> bad;
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  int dumps = 0;
  while (Clock::now() < until && bad.size() < 5) {
    auto pos = g->position(Clock::now());
    if (pos.any && pos.newest.count != pos.newest.seq * 7 + 3) bad.push_back("position: torn entry");
    nlohmann::json d = g->to_json(Clock::now());
    uint64_t last = 0;
    for (const auto& e : d["entries"]) {
      const uint64_t seq = e["seq"];
      const bool whole = e["count"] == seq * 7 + 3 && e["root"] == static_cast<int>(seq % 5) &&
                         e["dtype"] == (seq % 3 ? "float32" : "int64") &&
                         e["collective"] == (seq % 2 ? "all_reduce" : "broadcast");
      if (!whole) bad.push_back("torn entry " + e.dump());
      if (seq <= last) bad.push_back("out of order: " + d.dump());
      if (e["state"] != "running" && e["algorithm"] != "slot") {
        bad.push_back("ended without its algorithm: " + e.dump());
      }
      last = seq;
    }
    ++dumps;
  }
  stop = true;
  writer.join();
  INFO((bad.empty() ? std::string() : bad.front()) << " (" << dumps << " dumps, " << written.load() << " calls)");
  CHECK(bad.empty());
  CHECK(written.load() > 1000);  // the writer ran alongside, through the ring many times
}
