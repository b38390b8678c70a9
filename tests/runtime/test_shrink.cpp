// ProcessGroup::shrink() with threads as ranks (the real-process matrix is tests/failure/shrink_matrix.py): a rank
// that stops taking part is left out after the join window and told so when it comes back; the survivors' new
// group computes right, splits, and the old group fails its pending work and its later calls.

#include <catch2/catch.hpp>
#include <dcomm/error.hpp>
#include <thread>

#include "tests/runtime/ranks.hpp"

using namespace dcomm;
using dcomm::test::run_ranks;
using dcomm::test::value_of;

TEST_CASE("shrink leaves out a rank that stalls, the survivors go on, the late rank is excluded", "[runtime][shrink]") {
  constexpr int kSize = 5;
  constexpr int kStalled = 2;
  auto failures = run_ranks(
      kSize,
      [](ProcessGroup& pg, std::vector<std::string>& f) {
        const int me = pg.rank();
        if (me == kStalled) {
          // Stalls past the others' timeout and join window, then tries to go on.
          std::this_thread::sleep_for(std::chrono::seconds(4));
          try {
            pg.shrink({.timeout = std::chrono::seconds(20), .join_window = std::chrono::seconds(1)});
            f.push_back("the stalled rank got a group");
          } catch (const ExcludedError& e) {
            RANK_EXPECT(f, std::string(e.what()).find("was excluded") != std::string::npos, e.what());
            RANK_EXPECT(f, std::string(e.what()).find("members [0,1,3,4]") != std::string::npos, e.what());
          }
          return;
        }
        // Work still pending on the old group (it waits for rank 2, with a long timeout) fails when the group shrinks.
        std::vector<double> buf(1001, value_of(me, 0));
        CollectiveOptions o;
        o.timeout = std::chrono::seconds(25);
        o.async_op = true;
        WorkPtr pending = pg.all_reduce(Buffer(buf), ReduceOp::kSum, o);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ShrinkResult res = pg.shrink({.timeout = std::chrono::seconds(20), .join_window = std::chrono::seconds(1)});
        try {
          pending->wait();
          f.push_back("the old group's pending all_reduce succeeded");
        } catch (const Error& e) {
          RANK_EXPECT(f, std::string(e.what()).find("shrunk") != std::string::npos, e.what());
        }
        RANK_EXPECT(f, res.failed == std::vector<int>{kStalled}, "failed set");
        RANK_EXPECT(f, (res.survivors == std::vector<int>{0, 1, 3, 4}), "survivors in the old order");
        ProcessGroup& g = *res.group;
        RANK_EXPECT(f, g.size() == kSize - 1, "new size");
        RANK_EXPECT(f, g.rank() == (me < kStalled ? me : me - 1), "renumbered in the old order");
        // The new group computes right (against the serial sum over the survivors), at sizes 0, 1, odd, large.
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{70001}}) {
          std::vector<double> v(n);
          for (std::size_t i = 0; i < n; ++i) v[i] = value_of(me, i);
          g.all_reduce(Buffer(v));
          bool ok = true;
          for (std::size_t i = 0; i < n; ++i) {
            double want = 0;
            for (int s : res.survivors) want += value_of(s, i);
            ok = ok && v[i] == want;
          }
          RANK_EXPECT(f, ok, "all_reduce on the shrunk group, n=" + std::to_string(n));
        }
        // Subgroups come from the new group.
        auto half = g.split(g.rank() % 2, 0);
        std::vector<double> one{static_cast<double>(me)};
        half->all_reduce(Buffer(one));
        double want = 0;
        for (int r = 0; r < g.size(); ++r) {
          if (r % 2 == g.rank() % 2) want += res.survivors[static_cast<std::size_t>(r)];
        }
        RANK_EXPECT(f, one[0] == want, "split of the shrunk group");
        // The old group is gone.
        try {
          pg.barrier();
          f.push_back("the old group still works");
        } catch (const Error& e) {
          RANK_EXPECT(f, std::string(e.what()).find("shrunk") != std::string::npos, e.what());
        }
        RANK_EXPECT(
            f,
            [&] {
              try {
                pg.shrink();
              } catch (const InvalidUsageError&) {
                return true;
              }
              return false;
            }(),
            "a second shrink of the old group is refused");
      },
      std::chrono::seconds(30));
  for (const auto& x : failures) UNSCOPED_INFO(x);
  CHECK(failures.empty());
}
