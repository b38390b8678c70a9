// The call check carried by an algorithm's own first exchange (all_reduce[bruck], barrier[dissemination]): a
// mismatched call still raises on every rank, naming the rank and both values, whether the other side rides on
// the check, falls back to the separate check (too large to ride), or runs another algorithm; and the group stays
// in step afterwards. Threads as ranks over loopback and shm, world sizes that are not powers of two.

#include <catch2/catch.hpp>
#include <dcomm/error.hpp>

#include "collectives/cost_model.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;
using test::soon;

namespace {

// Rank r's input at index i: distinct per rank and index, exact in float32 sums.
float input(int rank, std::size_t i) { return static_cast<float>(1 + rank * 100 + static_cast<int>(i % 97)); }

Args all_reduce_of(std::vector<float>& in, std::vector<float>& out, std::size_t count) {
  Args a;
  a.coll = Collective::kAllReduce;
  a.send = Buffer(in.data(), count);
  a.recv = Buffer(out.data(), count);
  return a;
}

// One correct all_reduce of `count` elements with `algo`, checked against the serial sum.
void check_sum(Engine& engine, const GroupView& view, std::size_t count, const std::string& algo, uint64_t seq,
               test::RankRecord& rec) {
  std::vector<float> in(count), out(count, -1.0f);
  for (std::size_t i = 0; i < count; ++i) in[i] = input(view.rank, i);
  engine.run(all_reduce_of(in, out, count), algo, soon(), seq);
  for (std::size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < view.size; ++q) want += input(q, i);
    if (out[i] != want) {
      rec.failures.push_back("count " + std::to_string(count) + " element " + std::to_string(i) + ": got " +
                             std::to_string(out[i]) + " want " + std::to_string(want));
      return;
    }
  }
  rec.digests.push_back(test::digest(out.data(), count * sizeof(float)));
}

struct Mismatch {
  const char* name;
  std::function<void(Args&, std::string&)> change;  // applied on the last rank only
  const char* expect;
};

}  // namespace

TEST_CASE("a mismatched call raises on every rank when the check rides on an all_reduce's rounds",
          "[collectives][engine]") {
  // bruck carries the check on its gather; shm_direct makes it its first barrier (once its windows exist: the
  // warm-up call creates them, and the large count makes one rank set up larger ones, checking first).
  static std::vector<float> big(20000);
  for (const std::string base : {"bruck", "shm_direct"}) {
    std::vector<Mismatch> cases = {
        {"count (both ride)", [](Args& a, std::string&) { a.send.count = a.recv.count = 5; }, "count 5 vs 4"},
        {"count (too large to ride)", [](Args& a, std::string&) { a.send = a.recv = Buffer(big.data(), big.size()); },
         "count 20000 vs 4"},
        {"dtype", [](Args& a, std::string&) { a.send.dtype = a.recv.dtype = DType::kInt32; },
         "dtype int32 vs float32"},
        {"op", [](Args& a, std::string&) { a.red = ReduceOp::kMax; }, "op max vs sum"},
        {"algorithm (separate check)", [](Args&, std::string& algo) { algo = "ring"; }, "algorithm ring vs "},
        {"collective (a barrier riding too)",
         [](Args& a, std::string& algo) {
           a = Args{};
           a.coll = Collective::kBarrier;
           algo = "";
         },
         "collective barrier vs all_reduce"},
    };
    for (const char* transport : {"loopback", "shm"}) {
      for (int size : {2, 3, 5}) {
        for (const Mismatch& m : cases) {
          auto records = test::run_group(
              size,
              [&](const GroupView& view, test::RankRecord& rec) {
                auto engine = Engine::create(view);
                std::vector<float> x(8, 1.0f), y(8);
                engine->run(all_reduce_of(x, y, 4), base, soon(), 0);  // warm-up: shm_direct's windows
                Args a = all_reduce_of(x, y, 4);
                std::string algo = base;
                const int odd = view.size - 1;
                if (view.rank == odd) m.change(a, algo);
                try {
                  engine->run(a, algo, soon(), 1);
                  rec.failures.push_back(std::string(m.name) + " mismatch not detected");
                } catch (const InvalidUsageError& e) {
                  std::string w = e.what();
                  if (w.find("rank " + std::to_string(odd) + " called") == std::string::npos ||
                      w.find(m.expect) == std::string::npos) {
                    rec.failures.push_back("unhelpful message: " + w);
                  }
                }
                Args b;
                b.coll = Collective::kBarrier;
                engine->run(b, "", soon(), 2);  // the group is still in step
                check_sum(*engine, view, 7, base, 3, rec);
              },
              transport);
          auto failures = test::summarize(records);
          INFO(base << " " << transport << " P=" << size << " " << m.name << ": "
                    << (failures.empty() ? "" : failures.front()));
          CHECK(failures.empty());
        }
      }
    }
  }
}

TEST_CASE("broadcast and all_gather riding on the check raise on a mismatched root or count", "[collectives][engine]") {
  for (int size : {2, 3, 5}) {
    auto records = test::run_group(
        size,
        [&](const GroupView& view, test::RankRecord& rec) {
          auto engine = Engine::create(view);
          const int odd = view.size - 1;
          std::vector<int64_t> x(16, 7);
          Args b;
          b.coll = Collective::kBroadcast;
          b.send = b.recv = Buffer(x.data(), 6);
          b.root = view.rank == odd ? odd : 0;  // the flood runs along other edges from another root
          std::string m;
          try {
            engine->run(b, "dissemination", soon(), 0);
          } catch (const InvalidUsageError& e) {
            m = e.what();
          }
          if (m.find("rank " + std::to_string(odd) + " called broadcast") == std::string::npos ||
              m.find("(root " + std::to_string(odd) + " vs 0)") == std::string::npos) {
            rec.failures.push_back("broadcast root: " + (m.empty() ? std::string("not detected") : m));
          }
          std::vector<int32_t> in(4, view.rank), out(4 * static_cast<std::size_t>(view.size));
          Args g;
          g.coll = Collective::kAllGather;
          g.send = Buffer(in.data(), view.rank == odd ? 4 : 3);
          g.recv = Buffer(out.data(), (view.rank == odd ? 4 : 3) * static_cast<std::size_t>(view.size));
          m.clear();
          try {
            engine->run(g, "bruck", soon(), 1);
          } catch (const InvalidUsageError& e) {
            m = e.what();
          }
          if (m.find("rank " + std::to_string(odd) + " called all_gather") == std::string::npos ||
              m.find("count 4 vs 3") == std::string::npos) {
            rec.failures.push_back("all_gather count: " + (m.empty() ? std::string("not detected") : m));
          }
          // In step afterwards: a broadcast from the last rank, riding.
          std::vector<int64_t> y(5, view.rank == odd ? 41 : -1);
          b.send = b.recv = Buffer(y);
          b.root = odd;
          engine->run(b, "dissemination", soon(), 2);
          for (int64_t v : y) {
            if (v != 41) rec.failures.push_back("broadcast after the mismatches gave " + std::to_string(v));
          }
        },
        "shm");
    auto failures = test::summarize(records);
    INFO("P=" << size << ": " << (failures.empty() ? "" : failures.front()));
    CHECK(failures.empty());
  }
}

TEST_CASE("bruck rides the check up to its limit and falls back beyond it, with checks on and off",
          "[collectives][engine]") {
  for (const char* check : {"1", "0"}) {
    test::ScopedEnv env("DCOMM_CHECK_CALLS", check);
    for (int size : {2, 3, 4, 7}) {
      auto records = test::run_group(
          size,
          [&](const GroupView& view, test::RankRecord& rec) {
            auto engine = Engine::create(view);
            uint64_t seq = 0;
            // 1 element; the largest that rides at P = 2 (1024 floats = 4 KiB) and one beyond; a larger odd count.
            for (std::size_t count : {std::size_t{1}, std::size_t{1023}, std::size_t{1024}, std::size_t{1025},
                                      std::size_t{5001}}) {
              check_sum(*engine, view, count, "bruck", seq++, rec);
            }
          },
          "shm");
      auto failures = test::summarize(records);
      INFO("DCOMM_CHECK_CALLS=" << check << " P=" << size << ": " << (failures.empty() ? "" : failures.front()));
      CHECK(failures.empty());
    }
  }
}

TEST_CASE("the cost model charges the separate check to the algorithms that do not carry it", "[collectives][engine]") {
  CostParams p;
  p.alpha = 1e-6;
  p.beta = 1e-10;
  p.gamma = 2e-11;
  GroupView v;
  v.rank = 0;
  v.size = 4;
  p.check_calls = false;
  CHECK(std::string(cheapest(sample_args(Collective::kAllReduce, 8, 4), v, p)->name) == "butterfly");
  p.check_calls = true;
  CHECK(std::string(cheapest(sample_args(Collective::kAllReduce, 8, 4), v, p)->name) == "bruck");
  CHECK(std::string(cheapest(sample_args(Collective::kAllReduce, 64u << 20, 4), v, p)->name) != "bruck");
  const Algorithm* bruck = find_algorithm(Collective::kAllReduce, "bruck");
  const Algorithm* ring = find_algorithm(Collective::kAllReduce, "ring");
  REQUIRE(bruck != nullptr);
  CHECK(bruck->fuses_check);
  CHECK_FALSE(ring->fuses_check);
  CHECK(find_algorithm(Collective::kBarrier, "dissemination")->fuses_check);
  CHECK(find_algorithm(Collective::kAllReduce, "shm_direct")->fuses_check);
}
