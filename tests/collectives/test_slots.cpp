// The shared-memory slots (collectives/slots.hpp) and the cost model's stable choices. Threads as ranks over
// loopback and shm, world sizes that are not powers of two:
//   - small calls choose <collective>[slot] on one node and match the serial reference;
//   - a slot call and a message call (another count, another collective) meet in the same exchange: every rank
//     raises the mismatch naming the odd rank, and the group stays in step;
//   - a rank that never makes the call: the slot wait ends at the deadline naming that rank and the slot;
//   - DCOMM_SLOTS=0 takes the message path and the choice back;
//   - stabilize(): probes that differ by up to the band give the same parameters, hence the same choice.

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <dcomm/error.hpp>
#include <random>
#include <thread>

#include <sys/resource.h>

#include "collectives/cost_model.hpp"
#include "collectives/slots.hpp"
#include "tests/collectives/harness.hpp"

using namespace dcomm;
using namespace dcomm::coll;
using test::soon;

namespace {

CostParams params(double alpha, double beta, double gamma) {
  CostParams p;
  p.alpha = p.alpha_intra = alpha;
  p.beta = p.beta_intra = beta;
  p.gamma = gamma;
  return p;
}

// Rank r's input at index i: distinct per rank and index, exact in float32 sums.
float input(int rank, std::size_t i) { return static_cast<float>(1 + rank * 100 + static_cast<int>(i % 97)); }

std::string choice(const Engine& engine, Collective c, std::size_t bytes) {
  std::string text = engine.explain(c, bytes);
  auto at = text.rfind("choice: ");
  return at == std::string::npos ? text : text.substr(at + 8, text.find(' ', at + 8) - at - 8);
}

// An all_reduce of `count` floats by the cost model's choice, checked against the serial sum.
void check_sum(Engine& engine, const GroupView& view, std::size_t count, uint64_t seq, test::RankRecord& rec) {
  std::vector<float> in(count), out(count, -1.0f);
  for (std::size_t i = 0; i < count; ++i) in[i] = input(view.rank, i);
  Args a;
  a.coll = Collective::kAllReduce;
  a.send = Buffer(in.data(), count);
  a.recv = Buffer(out.data(), count);
  engine.run(a, "", soon(), seq);
  for (std::size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < view.size; ++q) want += input(q, i);
    if (out[i] != want) {
      rec.failures.push_back(fmt::format("count {} element {}: got {} want {}", count, i, out[i], want));
      return;
    }
  }
  rec.digests.push_back(test::digest(out.data(), count * sizeof(float)));
}

}  // namespace

TEST_CASE("small calls take the slots on one node and match the serial reference", "[collectives][slots]") {
  for (const char* transport : {"loopback", "shm"}) {
    for (int size : {2, 3, 5}) {
      auto records = test::run_group(
          size,
          [&](const GroupView& view, test::RankRecord& rec) {
            auto engine = Engine::create(view);
            for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce,
                                 Collective::kAllGather, Collective::kBarrier}) {
              if (choice(*engine, c, 8 * static_cast<std::size_t>(size)) != "slot") {
                rec.failures.push_back(std::string(to_string(c)) + " of 8 B per rank does not choose slot: " +
                                       engine->explain(c, 8));
              }
            }
            // Beyond a slot the choice is another algorithm.
            if (choice(*engine, Collective::kAllReduce, 1 << 20) == "slot") {
              rec.failures.push_back("a 1 MiB all_reduce chose slot");
            }
            uint64_t seq = 0;
            for (std::size_t count : {1, 2, 6, 7, 1000, 1024}) check_sum(*engine, view, count, seq++, rec);
          },
          transport);
      auto failures = test::summarize(records);
      INFO(transport << " P=" << size << ": " << (failures.empty() ? "" : failures.front()));
      CHECK(failures.empty());
    }
  }
}

TEST_CASE("a slot call and a message call meet in one exchange: every rank raises, naming the odd rank",
          "[collectives][slots]") {
  static std::vector<float> big(1 << 18);
  struct Odd {
    const char* name;
    std::function<void(Args&, std::string&)> change;
    const char* expect;
  };
  std::vector<Odd> cases = {
      {"a large count (ring by messages)",
       [](Args& a, std::string&) { a.send = a.recv = Buffer(big.data(), big.size()); }, "count 262144 vs 2"},
      {"a barrier", [](Args& a, std::string&) { a = Args{}, a.coll = Collective::kBarrier; },
       "collective barrier vs all_reduce"},
      {"another algorithm by name", [](Args&, std::string& algo) { algo = "bruck"; }, "algorithm bruck vs slot"},
      {"an op", [](Args& a, std::string&) { a.red = ReduceOp::kMin; }, "op min vs sum"},
  };
  for (const char* transport : {"loopback", "shm"}) {
    for (int size : {2, 3, 5}) {
      for (const Odd& m : cases) {
        auto records = test::run_group(
            size,
            [&](const GroupView& view, test::RankRecord& rec) {
              auto engine = Engine::create(view);
              std::vector<float> x(2, 1.0f), y(2);
              Args a;
              a.coll = Collective::kAllReduce;
              a.send = Buffer(x.data(), 2);
              a.recv = Buffer(y.data(), 2);
              std::string algo;
              const int odd = view.size - 1;
              if (view.rank == odd) m.change(a, algo);
              try {
                engine->run(a, algo, soon(), 0);
                rec.failures.push_back(std::string(m.name) + ": mismatch not detected");
              } catch (const InvalidUsageError& e) {
                std::string w = e.what();
                if (w.find(fmt::format("rank {} called", odd)) == std::string::npos ||
                    w.find(m.expect) == std::string::npos) {
                  rec.failures.push_back(std::string(m.name) + ": unhelpful message: " + w);
                }
              }
              check_sum(*engine, view, 3, 1, rec);  // the group is still in step
              check_sum(*engine, view, 5000, 2, rec);
            },
            transport);
        auto failures = test::summarize(records);
        INFO(transport << " P=" << size << " " << m.name << ": " << (failures.empty() ? "" : failures.front()));
        CHECK(failures.empty());
      }
    }
  }
}

TEST_CASE("a rank that never makes the call: the slot wait ends at the deadline naming it", "[collectives][slots]") {
  auto t0 = Clock::now();
  std::atomic<int> finished{0};
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    if (view.rank == 2) {  // never calls, but stays alive (its transport open) until the others are done
      while (finished.load() < 2 && Clock::now() - t0 < std::chrono::seconds(60)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    struct Done {
      std::atomic<int>& n;
      ~Done() { n.fetch_add(1); }
    } done{finished};
    std::vector<float> x(2, 1.0f), y(2);
    Args a;
    a.coll = Collective::kAllReduce;
    a.send = Buffer(x.data(), 2);
    a.recv = Buffer(y.data(), 2);
    try {
      engine->run(a, "slot", Deadline::after(std::chrono::milliseconds(1500)), 0);
      rec.failures.push_back("the call returned although rank 2 never made it");
    } catch (const TimeoutError& e) {
      std::string w = e.what();
      for (const char* want : {"shared-memory slot of rank 2 for call #0", "timeout 1.5 s", "rank 2 (pid"}) {
        if (w.find(want) == std::string::npos) rec.failures.push_back(std::string("lacks '") + want + "': " + w);
      }
    }
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
  CHECK(Clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("DCOMM_SLOTS=0 takes the messages and the previous choices", "[collectives][slots]") {
  test::ScopedEnv off("DCOMM_SLOTS", "0");
  auto records = test::run_group(3, [&](const GroupView& view, test::RankRecord& rec) {
    auto engine = Engine::create(view);
    if (choice(*engine, Collective::kAllReduce, 8) == "slot") rec.failures.push_back("chose slot without slots");
    check_sum(*engine, view, 7, 0, rec);
  });
  auto failures = test::summarize(records);
  INFO((failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}

TEST_CASE("stabilize: noisy probes give the same parameters and the same choices", "[collectives][cost]") {
  std::mt19937 rng(15);
  std::uniform_real_distribution<double> noise(-std::log2(kStableBand) * 0.99, std::log2(kStableBand) * 0.99);
  std::string source;
  const CostParams want = stabilize(params(kOneNodeAlpha, kOneNodeBeta, kOneNodeGamma), true, &source);
  CHECK(source.find("built-in") != std::string::npos);
  for (int i = 0; i < 200; ++i) {
    CostParams probed = params(kOneNodeAlpha * std::exp2(noise(rng)), kOneNodeBeta * std::exp2(noise(rng)),
                               kOneNodeGamma * std::exp2(noise(rng)));
    CostParams got = stabilize(probed, true, nullptr);
    REQUIRE(got.alpha == want.alpha);
    REQUIRE(got.beta == want.beta);
    REQUIRE(got.gamma == want.gamma);
    REQUIRE(got.alpha_intra == want.alpha_intra);
  }
  // Off the band, or on several nodes: powers of two, so probes that differ a little still mostly agree.
  CostParams far = stabilize(params(3e-5, 1e-9, 1e-9), true, nullptr);
  CHECK(far.alpha == std::exp2(std::round(std::log2(3e-5))));
  CHECK(stabilize(params(0.6e-6, 1e-10, 3e-11), false, nullptr).alpha == std::exp2(-21.0));
  // The choice of every collective at every size (8 B .. 64 MiB) and group size follows from the parameters
  // alone: with the same parameters it cannot flip. Check that the probe's noise no longer reaches it.
  GroupView view;
  for (int size : {2, 3, 4}) {
    view.size = size;
    for (int i = 0; i < 20; ++i) {
      CostParams a = stabilize(params(kOneNodeAlpha * std::exp2(noise(rng)), kOneNodeBeta * std::exp2(noise(rng)),
                                      kOneNodeGamma * std::exp2(noise(rng))),
                               true, nullptr);
      for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kAllGather}) {
        for (std::size_t bytes = 8; bytes <= (std::size_t{64} << 20); bytes *= 4) {
          Args args = sample_args(c, bytes, size);
          REQUIRE(cheapest(args, view, a) == cheapest(args, view, want));
        }
      }
    }
  }
}

TEST_CASE("repeated rooted calls through the slots (the engine's direct way) match the serial reference",
          "[collectives][slots]") {
  // The same shape many times, new data every time: the calls after the first go the engine's direct way
  // (EngineImpl::run_direct), a planned reduce without a work buffer (the non-root ranks pass no output), premul_sum
  // (never a repeat: the full way, with its work buffer) and avg between them, and each root in turn.
  for (const char* transport : {"loopback", "shm"}) {
    for (int size : {2, 3}) {
      auto records = test::run_group(
          size,
          [&](const GroupView& view, test::RankRecord& rec) {
            auto engine = Engine::create(view);
            // Rank r's value at call `it`, index i: differs on every rank, call and index; small integers, so that
            // float sums are exact and the reference may add them in any order.
            auto data = [](int rank, int it, std::size_t i) {
              return static_cast<float>(((rank + 1) * 7919 + it * 104729 + static_cast<int>(i) * 31) % 2001 - 1000);
            };
            uint64_t seq = 0;
            for (std::size_t count : {std::size_t{1}, std::size_t{5}}) {
              for (int it = 0; it < 40; ++it) {
                const int root = (it / 10) % view.size;
                const ReduceOp op = it % 10 == 7 ? ReduceOp::kPreMulSum : it % 10 == 8 ? ReduceOp::kAvg : ReduceOp::kSum;
                std::vector<float> in(count), out(count, -1.0f), bcast(count);
                for (std::size_t i = 0; i < count; ++i) in[i] = data(view.rank, it, i);
                Args r;
                r.coll = Collective::kReduce;
                r.root = root;
                r.red = Reduction(op, op == ReduceOp::kPreMulSum ? 0.5 : 1.0);
                r.send = Buffer(in.data(), count);
                if (view.rank == root) r.recv = Buffer(out.data(), count);  // the others pass none
                engine->run(r, "", soon(), seq++);
                // broadcast of the root's input, scatter of one element per rank, the same loop
                for (std::size_t i = 0; i < count; ++i) bcast[i] = view.rank == root ? data(root, it, i) : -1.0f;
                Args b;
                b.coll = Collective::kBroadcast;
                b.root = root;
                b.send = b.recv = Buffer(bcast.data(), count);
                engine->run(b, "", soon(), seq++);
                std::vector<float> all(count * static_cast<std::size_t>(view.size)), mine(count, -1.0f);
                for (std::size_t i = 0; i < all.size(); ++i) all[i] = data(root, it + 1, i);
                Args sc;
                sc.coll = Collective::kScatter;
                sc.root = root;
                if (view.rank == root) sc.send = Buffer(all.data(), all.size());
                sc.recv = Buffer(mine.data(), count);
                engine->run(sc, "", soon(), seq++);
                for (std::size_t i = 0; i < count; ++i) {
                  float want = 0;
                  for (int q = 0; q < view.size; ++q) want += data(q, it, i);
                  if (op == ReduceOp::kPreMulSum) want *= 0.5f;
                  if (op == ReduceOp::kAvg) want /= static_cast<float>(view.size);
                  if (view.rank == root && out[i] != want) {
                    rec.failures.push_back(fmt::format("reduce count {} call {} element {}: got {} want {}", count,
                                                       it, i, out[i], want));
                    return;
                  }
                  if (bcast[i] != data(root, it, i)) {
                    rec.failures.push_back(fmt::format("broadcast count {} call {} element {}: got {} want {}",
                                                       count, it, i, bcast[i], data(root, it, i)));
                    return;
                  }
                  const float want_mine = data(root, it + 1, static_cast<std::size_t>(view.rank) * count + i);
                  if (mine[i] != want_mine) {
                    rec.failures.push_back(fmt::format("scatter count {} call {} element {}: got {} want {}", count,
                                                       it, i, mine[i], want_mine));
                    return;
                  }
                }
              }
            }
          },
          transport);
      auto failures = test::summarize(records);
      INFO(transport << " P=" << size << ": " << (failures.empty() ? "" : failures.front()));
      CHECK(failures.empty());
    }
  }
}

TEST_CASE("a call that repeats the last one's shape but for its count, dtype or root is still caught",
          "[collectives][slots]") {
  // The engine reuses what it derived from the last call's shape (collectives/call_shape.hpp): a call that differs
  // in one field only must not pass for a repeat, whether the odd rank changes and the others repeat, or the
  // others change and the odd rank repeats. Every rank raises the mismatch naming the odd rank, and the calls
  // after it (the old shape again) give the serial reference's result.
  struct Odd {
    const char* name;
    Collective coll;
    std::function<void(Args&, int32_t* ints)> change;  // ints: this rank's own 8 (ranks are threads here)
    const char* changed_first;  // the difference as the error states it when the odd rank's call is the changed one
    const char* repeated_first;  // ... and when the odd rank's is the repeated one
    bool both_ways;              // a rooted call: only the odd rank changes (else both would only send and return)
    std::vector<int> sizes;
  };
  const std::vector<Odd> cases = {
      {"count", Collective::kAllReduce, [](Args& a, int32_t*) { a.send.count = a.recv.count = 3; }, "count 3 vs 2",
       "count 2 vs 3", true, {2, 3, 5}},
      {"dtype", Collective::kAllReduce,
       [](Args& a, int32_t* ints) { a.send = Buffer(ints, 2), a.recv = Buffer(ints + 4, 2); }, "dtype int32 vs float32",
       "dtype float32 vs int32", true, {2, 3, 5}},
      {"root", Collective::kReduce, [](Args& a, int32_t*) { a.root = 1; }, "root 1 vs 0", "", false, {2}},
  };
  for (const char* transport : {"loopback", "shm"}) {
    for (const Odd& m : cases) {
      for (int size : m.sizes) {
        for (bool odd_changes : {true, false}) {
          if (!odd_changes && !m.both_ways) continue;
          auto records = test::run_group(
              size,
              [&](const GroupView& view, test::RankRecord& rec) {
                auto engine = Engine::create(view);
                std::vector<float> x(4), y(4);
                for (std::size_t i = 0; i < x.size(); ++i) x[i] = input(view.rank, i);
                auto base = [&] {
                  Args a;
                  a.coll = m.coll;
                  a.send = Buffer(x.data(), 2);
                  a.recv = Buffer(y.data(), 2);
                  return a;
                };
                auto repeat = [&](uint64_t seq) {
                  std::fill(y.begin(), y.end(), -1.0f);
                  engine->run(base(), "", soon(), seq);
                  if (m.coll == Collective::kReduce && view.rank != 0) return;
                  for (std::size_t i = 0; i < 2; ++i) {
                    float want = 0;
                    for (int q = 0; q < view.size; ++q) want += input(q, i);
                    if (y[i] != want) {
                      rec.failures.push_back(fmt::format("call #{} element {}: {} vs {}", seq, i, y[i], want));
                    }
                  }
                };
                for (uint64_t seq = 0; seq < 3; ++seq) repeat(seq);
                const int odd = view.size - 1;
                Args a = base();
                std::vector<int32_t> ints(8, 3);
                if ((view.rank == odd) == odd_changes) m.change(a, ints.data());
                try {
                  engine->run(a, "", soon(), 3);
                  rec.failures.push_back(std::string(m.name) + ": mismatch not detected");
                } catch (const InvalidUsageError& e) {
                  const std::string w = e.what();
                  const char* expect = odd_changes ? m.changed_first : m.repeated_first;
                  if (w.find(fmt::format("rank {} called", odd)) == std::string::npos ||
                      w.find(expect) == std::string::npos) {
                    rec.failures.push_back(std::string(m.name) + ": unhelpful message: " + w);
                  }
                }
                repeat(4);  // in step, on the old shape again
                repeat(5);
              },
              transport);
          auto failures = test::summarize(records);
          INFO(transport << " P=" << size << " " << m.name << (odd_changes ? " (odd rank changes)" : " (others change)")
                         << ": " << (failures.empty() ? "" : failures.front()));
          CHECK(failures.empty());
        }
      }
    }
  }
}

TEST_CASE("copy_bytes moves exactly n bytes for every small size", "[collectives][slots]") {
  // The slots' inline copy of a few bytes: every size 0-40 at every offset 0-7, against memcpy, with guard bytes
  // around the destination that must stay as they were.
  for (std::size_t n = 0; n <= 40; ++n) {
    for (std::size_t off = 0; off < 8; ++off) {
      unsigned char src[64], got[64], want[64];
      for (std::size_t i = 0; i < sizeof src; ++i) src[i] = static_cast<unsigned char>(37 * i + 11 * n + off + 1);
      std::memset(got, 0xA5, sizeof got);
      std::memset(want, 0xA5, sizeof want);
      dcomm::coll::copy_bytes(got + off + 8, src + (7 - off), n);
      std::memcpy(want + off + 8, src + (7 - off), n);
      INFO("n " << n << " offset " << off);
      CHECK(std::memcmp(got, want, sizeof got) == 0);
    }
  }
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("a group's slots take no page faults as the ring goes round the first time", "[collectives][slots]") {
  // A rank's own segment was mapped without MAP_POPULATE: every exchange of more than a head's bytes (CmaHello,
  // 32 B) wrote a fresh 4 KiB data page of its own ring, a minor fault each, for the ring's first kSlotDepth calls.
  // all_to_all[cma] of 64 KiB on 2 ranks bound took 4.5-5.5 us a call for ~130 calls, then 3.5; the tuner, which
  // measures at a class's first call, timed cma in those calls and chose bruck (5.7 us a call in a loop) in 4 of
  // 4 runs. The segments' pages are reserved up front (posix_fallocate) anyway: mapping them all costs no memory.
  auto recs = test::run_group(
      2,
      [&](const GroupView& view, test::RankRecord& rec) {
        Args none;
        none.coll = Collective::kBarrier;
        const Deadline deadline = soon();
        Context c(none, view, deadline, 0xFFFFF, "slots test", 0);
        auto slots = SlotChannel::create(c, 64);
        if (!slots) {
          rec.failures.push_back("no slots on one host");
          return;
        }
        std::vector<char> data(256);
        for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(view.rank * 31 + i);
        auto faults = [] {
          rusage u{};
          ::getrusage(RUSAGE_THREAD, &u);
          return u.ru_minflt;
        };
        const long before = faults();
        for (uint64_t seq = 1; seq <= kSlotDepth + 2; ++seq) {
          data[0] = static_cast<char>(seq);
          Context call(none, view, deadline, seq, "slots test", 0);
          slots->exchange(call, nullptr, {}, data.data(), data.size());
          const char* got = slots->data(call, 1 - view.rank, data.size());
          if (got[0] != static_cast<char>(seq) || got[1] != static_cast<char>((1 - view.rank) * 31 + 1)) {
            rec.failures.push_back(fmt::format("exchange {} read the wrong data", seq));
            return;
          }
        }
        const long taken = faults() - before;
        // A few for the thread's own stack and heap at most; before the fix, one per exchange (kSlotDepth). Under a
        // sanitizer the count also holds its shadow memory's first touches (TSan: ~570): not checked there.
        if (taken >= 16 && !kSanitized) {
          rec.failures.push_back(fmt::format("{} page faults in {} exchanges of {} B", taken, kSlotDepth + 2, data.size()));
        }
      },
      "shm");
  CHECK(test::summarize(recs) == std::vector<std::string>{});
}
