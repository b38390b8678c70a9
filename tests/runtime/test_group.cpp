// Collectives through the process group: issue order of async calls, forced algorithms, explain, subgroups,
// timeouts that name the call, and poisoning after abort.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "tests/runtime/group_algorithms.hpp"
#include "tests/runtime/ranks.hpp"

using namespace dcomm;
using dcomm::test::run_ranks;
using dcomm::test::value_of;

namespace {

std::string first(const std::vector<std::string>& f) { return f.empty() ? "" : f.front(); }

double sum_over_ranks(int size, std::size_t i) {
  double s = 0;
  for (int r = 0; r < size; ++r) s += value_of(r, i);
  return s;
}

}  // namespace

TEST_CASE("async collectives run in issue order and each gets its own result", "[runtime][group]") {
  auto failures = run_ranks(3, [](ProcessGroup& pg, std::vector<std::string>& f) {
    constexpr int kCalls = 6;
    std::vector<std::vector<double>> bufs(kCalls, std::vector<double>(1001));
    std::vector<WorkPtr> works;
    for (int c = 0; c < kCalls; ++c) {
      for (std::size_t i = 0; i < bufs[c].size(); ++i) bufs[c][i] = value_of(pg.rank(), i) * (c + 1);
      CollectiveOptions o;
      o.async_op = true;
      works.push_back(pg.all_reduce(Buffer(bufs[c]), ReduceOp::kSum, o));
    }
    wait_all(works);
    for (int c = 0; c < kCalls; ++c) {
      RANK_EXPECT(f, works[c]->is_completed(), "handle completed");
      for (std::size_t i = 0; i < bufs[c].size(); i += 97) {
        RANK_EXPECT(f, bufs[c][i] == sum_over_ranks(3, i) * (c + 1), "call " + std::to_string(c) + " element " + std::to_string(i));
      }
    }
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("every algorithm can be forced per call and per group, and unknown names are refused", "[runtime][group]") {
  auto failures = run_ranks(5, [](ProcessGroup& pg, std::vector<std::string>& f) {
    for (const std::string& name : algorithms(Collective::kAllReduce)) {
      std::vector<double> x(37);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = value_of(pg.rank(), i);
      CollectiveOptions o;
      o.algorithm = name;
      if (test::unfit_for_group(pg, Collective::kAllReduce, name)) {  // hier: these ranks share one node
        try {
          pg.all_reduce(Buffer(x), ReduceOp::kSum, o);
          f.push_back(name + " ran on a group it is not for");
        } catch (const InvalidUsageError& e) {
          RANK_EXPECT(f, std::string(e.what()).find("does not handle this call") != std::string::npos, e.what());
        }
        continue;
      }
      pg.all_reduce(Buffer(x), ReduceOp::kSum, o);
      for (std::size_t i = 0; i < x.size(); ++i) RANK_EXPECT(f, x[i] == sum_over_ranks(5, i), name + " result");
    }
    pg.set_algorithm(Collective::kAllReduce, "ring");
    RANK_EXPECT(f, pg.explain(Collective::kAllReduce, 1 << 20).find("ring") != std::string::npos, "explain names ring");
    try {
      std::vector<float> y(4, 1.0f);
      CollectiveOptions o;
      o.algorithm = "no_such_algorithm";
      pg.all_reduce(Buffer(y), ReduceOp::kSum, o);
      f.push_back("an unknown algorithm was accepted");
    } catch (const InvalidUsageError& e) {
      RANK_EXPECT(f, std::string(e.what()).find("ring") != std::string::npos, std::string("lists valid names: ") + e.what());
    }
    pg.barrier();
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("split and new_group make independent groups over the same ranks", "[runtime][group]") {
  auto failures = run_ranks(5, [](ProcessGroup& pg, std::vector<std::string>& f) {
    int r = pg.rank();
    // Colors: even and odd world ranks; key reverses the order inside each color.
    auto sub = pg.split(r % 2, -r);
    RANK_EXPECT(f, sub != nullptr, "split returns a group");
    int expect_size = r % 2 == 0 ? 3 : 2;
    RANK_EXPECT(f, sub->size() == expect_size, "subgroup size");
    std::vector<int64_t> mine = {r};
    std::vector<int64_t> all(static_cast<std::size_t>(sub->size()));
    sub->all_gather(Buffer(mine), Buffer(all));
    for (int g = 0; g < sub->size(); ++g) {
      // Ordered by key = -rank: the highest world rank of the color comes first.
      int64_t expect = (r % 2 == 0 ? 4 : 3) - 2 * g;
      RANK_EXPECT(f, all[static_cast<std::size_t>(g)] == expect, "split member order");
    }
    // A subgroup's any-source receive reports group ranks, not world ranks.
    if (sub->size() == 2) {
      std::vector<int32_t> v = {r};
      if (sub->rank() == 1) {
        sub->send(Buffer(v), 0, 0);
      } else {
        auto w = sub->recv(Buffer(v), kAnySource, 0);
        RANK_EXPECT(f, w->source() == 1 && v[0] == 1, "group-rank source in a subgroup");
      }
    }
    auto pair = pg.new_group({4, 1});
    RANK_EXPECT(f, (pair != nullptr) == (r == 4 || r == 1), "new_group membership");
    if (pair) {
      RANK_EXPECT(f, pair->rank() == (r == 4 ? 0 : 1), "new_group rank order follows the list");
      std::vector<double> x = {value_of(r, 0)};
      pair->all_reduce(Buffer(x), ReduceOp::kMax);
      RANK_EXPECT(f, x[0] == value_of(4, 0), "new_group all_reduce");
    }
    auto none = pg.split(r == 2 ? -1 : 0, 0);
    RANK_EXPECT(f, (none == nullptr) == (r == 2), "a negative color joins no group");
    pg.barrier();
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("new_group_of_members: only the members call, each group named by its own store", "[runtime][group]") {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Store>> stores;
  stores.clear();
  auto failures = run_ranks(5, [](ProcessGroup& pg, std::vector<std::string>& f) {
    auto store_of = [](const std::string& name) {
      std::lock_guard<std::mutex> lock(mu);
      auto& s = stores[name];
      if (!s) s = make_memory_store();
      return s;
    };
    const int r = pg.rank();
    // Each rank makes only the groups it is in, so the ranks make different numbers of groups (torch's way).
    const std::vector<std::vector<int>> sets = {{0, 2, 4}, {1, 3}, {4, 0}, {2}, {3, 2, 1, 0}, {0, 2, 4}};
    for (std::size_t i = 0; i < sets.size(); ++i) {
      const auto& s = sets[i];
      auto at = std::find(s.begin(), s.end(), r);
      if (at == s.end()) continue;
      auto g = pg.new_group_of_members(s, *store_of("group " + std::to_string(i)));
      const std::string what = "group " + std::to_string(i);
      RANK_EXPECT(f, g && g->rank() == at - s.begin() && g->size() == static_cast<int>(s.size()), what + " rank");
      if (!g) continue;
      std::vector<double> x = {value_of(r, i), value_of(r, i + 1)};
      g->all_reduce(Buffer(x), ReduceOp::kSum);
      for (std::size_t k = 0; k < 2; ++k) {
        double want = 0;
        for (int m : s) want += value_of(m, i + k);
        RANK_EXPECT(f, x[k] == want, what + " all_reduce");
      }
    }
    // Members given different ranks are refused at once, the first member too (no group, no wait for rank 2).
    if (r == 0 || r == 1) {
      try {
        auto g = pg.new_group_of_members(r == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2},
                                         *store_of("mismatch"));
        f.push_back("rank " + std::to_string(r) + ": a member's different rank list was accepted");
      } catch (const InvalidUsageError& e) {
        const std::string msg = e.what();  // both refuse, each naming both lists
        RANK_EXPECT(f, msg.find("[0,1,2]") != std::string::npos && msg.find("[0,1]") != std::string::npos,
                    "the refusal names both lists: " + msg);
      }
    }
    pg.barrier();
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("a collective a peer never joins times out naming the call, and poisons the group", "[runtime][group]") {
  static std::atomic<bool> rank0_done{false};
  rank0_done = false;
  auto failures = run_ranks(2, [](ProcessGroup& pg, std::vector<std::string>& f) {
    if (pg.rank() == 1) {
      // Stay alive (so this is a timeout, not a dead peer) until rank 0 has seen its error.
      for (int i = 0; i < 3000 && !rank0_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    std::vector<float> x(10, 1.0f);
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(500);
    try {
      pg.all_reduce(Buffer(x), ReduceOp::kSum, o);
      f.push_back("all_reduce without its peer returned");
    } catch (const Error& e) {
      std::string msg = e.what();
      RANK_EXPECT(f, e.code() == ErrorCode::kTimeout, "a timeout: " + msg);
      RANK_EXPECT(f, msg.find("all_reduce") != std::string::npos, "names the op: " + msg);
      RANK_EXPECT(f, msg.find("rank 1") != std::string::npos, "names the peer: " + msg);
    }
    try {
      pg.barrier();
      f.push_back("a poisoned group accepted a barrier");
    } catch (const Error& e) {
      RANK_EXPECT(f, std::string(e.what()).find("failed earlier") != std::string::npos, e.what());
    }
    rank0_done = true;
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("abort fails queued work and poisons the group", "[runtime][group]") {
  auto failures = run_ranks(2, [](ProcessGroup& pg, std::vector<std::string>& f) {
    pg.barrier();
    pg.abort();
    std::vector<int32_t> x(3, 1);
    try {
      pg.all_reduce(Buffer(x), ReduceOp::kSum);
      f.push_back("all_reduce after abort returned");
    } catch (const Error& e) {
      RANK_EXPECT(f, e.code() == ErrorCode::kAborted, std::string("aborted: ") + e.what());
    }
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("host and device buffers mixed in one call are refused before any I/O", "[runtime][group]") {
  auto failures = run_ranks(2, [](ProcessGroup& pg, std::vector<std::string>& f) {
    std::vector<float> a(8, 1.0f), b(8, 0.0f);
    Buffer dev(b.data(), b.size(), DType::kFloat32, Device::cuda(0));
    try {
      pg.all_reduce(Buffer(a), dev, ReduceOp::kSum);
      f.push_back("a host send buffer with a cuda:0 receive buffer was accepted");
    } catch (const InvalidUsageError& e) {
      std::string msg = e.what();
      RANK_EXPECT(f, msg.find("all_reduce") != std::string::npos && msg.find("cuda:0") != std::string::npos,
                  "names the call and the device: " + msg);
    }
    pg.barrier();  // still usable
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("a timeout's flight-recorder report says which rank never reached the call, and where it is",
          "[runtime][group][flight]") {
  static std::atomic<int> reported{0};
  reported = 0;
  auto failures = run_ranks(3, [](ProcessGroup& pg, std::vector<std::string>& f) {
    std::vector<float> x(33);
    for (int call = 0; call < 3; ++call) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(value_of(pg.rank(), i));
      pg.all_reduce(Buffer(x), ReduceOp::kSum);
    }
    if (pg.rank() == 1) {
      // In user code, alive (its flight recorder answers), until both peers have their report.
      for (int i = 0; i < 3000 && reported < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(800);
    try {
      pg.all_reduce(Buffer(x), ReduceOp::kSum, o);
      f.push_back("all_reduce without rank 1 returned");
    } catch (const Error& e) {
      std::string msg = e.what();
      RANK_EXPECT(f, e.code() == ErrorCode::kTimeout, "a timeout: " + msg);
      RANK_EXPECT(f, msg.find("rank 1 failed first") != std::string::npos, "blames rank 1 first: " + msg);
      RANK_EXPECT(f, msg.find("flight recorder: ranks 0, 2 are in all_reduce #3") != std::string::npos,
                  "says where the others are: " + msg);
      RANK_EXPECT(f, msg.find("rank 1 last finished all_reduce #2 and is in user code") != std::string::npos,
                  "says where rank 1 is: " + msg);
    }
    ++reported;
  });
  INFO(first(failures));
  CHECK(failures.empty());
}

TEST_CASE("a small call that waited for its peer is recorded as ending when it ended, not when it started",
          "[runtime][group][flight]") {
  // The recorder takes a small call's start for its end only when the call never waited (run_recorded): rank 1's
  // broadcast waits ~0.7 s for its root here, so "in user code for" must count from its end, not its start.
  static std::atomic<int> reported{0};
  reported = 0;
  auto failures = run_ranks(2, [](ProcessGroup& pg, std::vector<std::string>& f) {
    std::vector<float> x(3);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(value_of(pg.rank(), i));
    if (pg.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(700));
    pg.broadcast(Buffer(x), 0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      RANK_EXPECT(f, x[i] == static_cast<float>(value_of(0, i)), "the root's data at " + std::to_string(i));
    }
    if (pg.rank() == 1) {
      for (int i = 0; i < 3000 && reported < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    CollectiveOptions o;
    o.timeout = std::chrono::milliseconds(400);
    try {
      pg.all_reduce(Buffer(x), ReduceOp::kSum, o);
      f.push_back("all_reduce without rank 1 returned");
    } catch (const Error& e) {
      const std::string msg = e.what();
      const std::string said = "rank 1 last finished broadcast #0 and is in user code for ";
      const auto at = msg.find(said);
      RANK_EXPECT(f, at != std::string::npos, "says where rank 1 is: " + msg);
      if (at != std::string::npos) {
        const double seconds = std::stod(msg.substr(at + said.size()));
        // From its end: about the timeout (0.4 s). From its start it would be 0.7 s more.
        RANK_EXPECT(f, seconds < 0.95, "counted from the broadcast's end: " + msg);
      }
    }
    ++reported;
  });
  INFO(first(failures));
  CHECK(failures.empty());
}
