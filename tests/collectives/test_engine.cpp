// The engine around the algorithms: validation before I/O, the cross-rank call check and the context its
// errors carry. Selection (DCOMM_ALGO, set_algorithm, the cost model, explain(), the tuning file, two link
// classes) is in test_selection.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <dcomm/error.hpp>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string_view>

#include "collectives/call_shape.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/device_support.hpp"
#include "collectives/selector.hpp"
#include "collectives/topology.hpp"
#include "collectives/validate.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;

using test::fake_view;
using test::invalid_message;
using test::soon;

TEST_CASE("caller mistakes are found naming the argument and the problem", "[collectives][engine]") {
  std::vector<float> f(8);
  std::vector<int32_t> i(8);
  GroupView v = fake_view(1, 4);
  Args a;
  a.coll = Collective::kBroadcast;
  a.send = a.recv = Buffer(f);
  a.root = 4;
  std::string m = call_problem(a, v);
  CHECK_THAT(m, Catch::Contains("root 4 is out of range"));

  a = Args{};
  a.coll = Collective::kAllReduce;
  a.send = Buffer(nullptr, 3, DType::kFloat32);
  a.recv = Buffer(f.data(), 3);
  CHECK_THAT(call_problem(a, v), Catch::Contains("send is null but its count is 3"));

  a.send = a.recv = Buffer(f);
  a.red = ReduceOp::kBAnd;
  CHECK_THAT(call_problem(a, v), Catch::Contains("op band does not apply to dtype float32"));

  a.red = ReduceOp::kSum;
  a.recv = Buffer(i);
  CHECK_THAT(call_problem(a, v),
             Catch::Contains("recv has dtype int32 but send has float32"));
  a.recv = Buffer(f.data(), 7);
  CHECK_THAT(call_problem(a, v), Catch::Contains("recv has count 7 but must have 8"));

  a = Args{};
  a.coll = Collective::kAllGather;
  a.send = Buffer(f.data(), 2);
  a.recv = Buffer(f.data(), 6);
  CHECK_THAT(call_problem(a, v), Catch::StartsWith("recv has count 6 but must have 8"));

  a = Args{};
  a.coll = Collective::kGather;
  a.vector_variant = true;
  a.root = 1;
  a.send = Buffer(f.data(), 1);
  a.recv = Buffer(f);
  a.recv_counts = {1, 1, 1};
  CHECK_THAT(call_problem(a, v), Catch::Contains("counts has 3 entries for a group of 4"));
  a.recv_counts = {1, 1, 1, 6};
  CHECK_THAT(call_problem(a, v), Catch::Contains("block 3 (displacement 3, count 6) ends past the buffer's 8 elements"));

  a = Args{};
  a.coll = Collective::kAllToAll;
  a.send = a.recv = Buffer(f.data(), 6);
  CHECK_THAT(call_problem(a, v), Catch::Contains("not a multiple of the group size 4"));
}

TEST_CASE("invalid calls raise on every rank, move no data and leave the group usable", "[collectives][engine]") {
  auto records = test::run_group(3, [](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::vector<float> x(5, 1.0f);
    Args bad;
    bad.coll = Collective::kReduce;
    bad.root = 7;
    bad.send = bad.recv = Buffer(x);
    try {
      engine->run(bad, "", soon(), 0);
      rec.failures.push_back("bad root accepted");
    } catch (const InvalidUsageError& e) {
      // Every rank's root is out of range: the lowest, rank 0, is named everywhere.
      if (std::string(e.what()).find("invalid on rank 0: root 7 is out of range") == std::string::npos) {
        rec.failures.push_back(std::string("bad root: ") + e.what());
      }
    }
    Args scatterv;  // binomial scatter has no v-variant: asking for it by name is the caller's mistake
    scatterv.coll = Collective::kScatter;
    scatterv.vector_variant = true;
    scatterv.send_counts = {1, 1, 1};
    scatterv.send = Buffer(x.data(), 3);
    scatterv.recv = Buffer(x.data() + 3, 1);
    std::string m = invalid_message([&] { engine->run(scatterv, "binomial", soon(), 1); });
    if (m.find("does not handle this call") == std::string::npos) rec.failures.push_back("scatterv: " + m);
    m = invalid_message([&] { engine->run(scatterv, "quantum", soon(), 2); });
    if (m.find("valid names: binomial, linear") == std::string::npos) rec.failures.push_back("unknown: " + m);
    Args good;
    good.coll = Collective::kAllReduce;
    good.send = good.recv = Buffer(x);
    engine->run(good, "", soon(), 3);  // the bad calls used their numbers on every rank alike
    if (x[0] != 3.0f) rec.failures.push_back("all_reduce after the bad call gave " + std::to_string(x[0]));
  });
  auto failures = test::summarize(records);
  CHECK(failures.empty());
}

TEST_CASE("mismatched calls raise on every rank, naming the rank and both values", "[collectives][engine]") {
  struct Mismatch {
    const char* name;
    std::function<void(Args&, std::string&)> change;  // applied on rank 2 only
    const char* expect;
  };
  static std::vector<float> spare(64);
  std::vector<Mismatch> cases = {
      {"count", [](Args& a, std::string&) { a.send.count = a.recv.count = 5; }, "count 5 vs 4"},
      {"dtype", [](Args& a, std::string&) { a.send.dtype = a.recv.dtype = DType::kInt32; }, "dtype int32 vs float32"},
      {"op", [](Args& a, std::string&) { a.red = ReduceOp::kMax; }, "op max vs sum"},
      {"collective",
       [](Args& a, std::string& algo) {
         a.coll = Collective::kBroadcast;
         algo = "";  // "ring" is no broadcast algorithm: that would fail on this rank alone, before the check
       },
       "collective broadcast vs all_reduce"},
      {"algorithm", [](Args&, std::string& algo) { algo = "tree"; }, "algorithm tree vs ring"},
      // Device calls are cut into larger pieces (kDefaultDeviceChunkBytes): caught before any piece moves. A build
      // without CUDA rejects rank 2's device buffer before the check, on every rank alike, blaming rank 2.
      {"device", [](Args& a, std::string&) { a.send.device = a.recv.device = Device::cuda(0); },
       DCOMM_CUDA_REDUCE ? "buffers on a device vs host" : "which this build cannot reduce or stage"},
  };
  for (const Mismatch& m : cases) {
    auto records = test::run_group(4, [&](const GroupView& view, test::RankRecord& rec) {
      auto engine = Engine::create(view);
      std::vector<float> x(8, 1.0f);
      Args a;
      a.coll = Collective::kAllReduce;
      a.send = a.recv = Buffer(x.data(), 4);
      std::string algo = "ring";
      if (view.rank == 2) m.change(a, algo);
      try {
        engine->run(a, algo, soon(), 0);
        rec.failures.push_back(std::string(m.name) + " mismatch not detected");
      } catch (const InvalidUsageError& e) {
        std::string w = e.what();
        bool blames_2 = w.find("rank 2 called") != std::string::npos || w.find("invalid on rank 2") != std::string::npos;
        if (!blames_2 || w.find(m.expect) == std::string::npos) {
          rec.failures.push_back("unhelpful message: " + w);
        }
      }
      Args b;
      b.coll = Collective::kBarrier;
      engine->run(b, "", soon(), 1);  // the group is still in step
    });
    auto failures = test::summarize(records);
    INFO(m.name << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("a mismatched root raises on every rank", "[collectives][engine]") {
  auto records = test::run_group(3, [](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    std::vector<int64_t> x(6, 7);
    Args a;
    a.coll = Collective::kBroadcast;
    a.send = a.recv = Buffer(x);
    a.root = view.rank == 1 ? 2 : 0;
    std::string m = invalid_message([&] { engine->run(a, "binomial", soon(), 0); });
    if (m.find("rank 1 called broadcast") == std::string::npos || m.find("(root 2 vs 0)") == std::string::npos) {
      rec.failures.push_back(m);
    }
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("transport errors carry the collective, algorithm and rank", "[collectives][engine]") {
  test::ScopedEnv no_check("DCOMM_CHECK_CALLS", "0");
  auto records = test::run_group(2, [](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    if (view.rank == 1) return;  // never joins: rank 0's receive fails (the peer is gone) or times out
    std::vector<float> x(4, 1.0f);
    Args a;
    a.coll = Collective::kAllReduce;
    a.send = a.recv = Buffer(x);
    try {
      engine->run(a, "ring", Deadline::after(std::chrono::milliseconds(300)), 0);
      rec.failures.push_back("no timeout");
    } catch (const Error& e) {
      bool kind = e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kRemoteError;
      if (!kind || std::string(e.what()).rfind("all_reduce[ring] rank 0/2", 0) != 0) rec.failures.push_back(e.what());
    }
  });
  CHECK(test::summarize(records).empty());
}

TEST_CASE("a call matches a shape exactly when the shape of the call equals it", "[collectives][engine]") {
  // Every field of a call that the shape reads, changed one at a time and in pairs from a base call; matches()
  // (the repeated call's test) must agree with building the call's shape and comparing.
  using dcomm::coll::Args;
  using dcomm::coll::CallShape;
  double a[8], b[8];
  auto base = [&] {
    Args x;
    x.coll = Collective::kAllReduce;
    x.send = Buffer(a, 3, DType::kFloat32);
    x.recv = Buffer(b, 3, DType::kFloat32);
    x.root = 1;
    return x;
  };
  std::vector<std::function<void(Args&)>> changes = {
      [](Args& x) { x.coll = Collective::kReduce; },
      [](Args& x) { x.send.count = 4; },
      [](Args& x) { x.recv.count = 2; },
      [](Args& x) { x.send.dtype = DType::kInt32; },
      [](Args& x) { x.recv.dtype = DType::kFloat64; },
      [](Args& x) { x.red.op = ReduceOp::kMax; },
      [](Args& x) { x.red.op = ReduceOp::kPreMulSum; },
      [](Args& x) { x.root = 0; },
      [&](Args& x) { x.recv.data = x.send.data; },   // in place
      [](Args& x) { x.send.data = nullptr; },
      [](Args& x) { x.recv.data = nullptr; },
      [](Args& x) { x.vector_variant = true; },
      [](Args& x) { x.send.device = Device::cuda(0); },
      [](Args& x) { x.recv.device = Device::cuda(1); },
      [&](Args& x) { x.send.data = a + 1; },  // another address, same shape
      [&](Args& x) { x.recv.data = b + 2; },
      [](Args&) {},
  };
  int agreed = 0;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    for (std::size_t j = i; j < changes.size(); ++j) {
      for (bool from_changed : {false, true}) {
        Args shape_of = base(), call = base();
        changes[i](from_changed ? shape_of : call);
        changes[j](call);
        const CallShape shape = CallShape::of(shape_of);
        const bool want = shape.cacheable && shape == CallShape::of(call);
        INFO("changes " << i << " and " << j << (from_changed ? " (the first to the shape)" : ""));
        CHECK(shape.matches(call) == want);
        agreed += want ? 1 : 0;
      }
    }
  }
  CHECK(agreed > 10);  // the unchanged call and the other addresses match
}
