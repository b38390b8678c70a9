// dcomm-demo: the README's main job. Every rank joins the world, runs a few collectives on data that differs per
// rank, checks each result against the value computed locally from the closed form, and prints what it did.
//   dcomm-run --nproc-per-node 4 -- dcomm-demo [elements]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace {

// Rank r's element i: distinct per (rank, index), and its sum over ranks has a closed form.
double value(int rank, std::size_t i) { return static_cast<double>(rank + 1) * 0.5 + static_cast<double>(i % 97); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Timed calls after the first: the first pays the group's one-time setup (connections, shared segments).
constexpr int kTimedCalls = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What the user should compare the all_reduce with: one copy of the same bytes inside this process, warmed.
double copy_seconds(const std::vector<double>& src) {
  std::vector<double> dst(src.size());
  std::vector<double> times;
  for (int i = 0; i < kTimedCalls + 1; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::copy(src.begin(), src.end(), dst.begin());
    times.push_back(seconds_since(t0));
  }
  times.erase(times.begin());
  volatile double keep = dst.empty() ? 0.0 : dst.back();  // the copy must happen
  (void)keep;
  return median(times);
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1u << 20) + 3;
  try {
    auto pg = dcomm::init();
    const int rank = pg->rank();
    const int size = pg->size();
    const auto& id = pg->identity();
    int wrong = 0;

    // all_reduce (sum) of n doubles: the first call, then kTimedCalls warmed calls, each checked below.
    std::vector<double> x(n);
    double t_first = 0;
    std::vector<double> warmed;
    for (int call = 0; call <= kTimedCalls; ++call) {
      for (std::size_t i = 0; i < n; ++i) x[i] = value(rank, i);
      pg->barrier();  // start together, so one rank's lateness is not timed as the collective's
      auto t0 = std::chrono::steady_clock::now();
      pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
      const double t = seconds_since(t0);
      if (call == 0) {
        t_first = t;
      } else {
        warmed.push_back(t);
      }
    }
    // The slowest rank's median is the group's time.
    std::vector<double> times = {t_first, median(warmed), copy_seconds(x)};
    pg->all_reduce(dcomm::Buffer(times), dcomm::ReduceOp::kMax);
    for (std::size_t i = 0; i < n; ++i) {
      double expect = 0;
      for (int r = 0; r < size; ++r) expect += value(r, i);
      if (x[i] != expect) ++wrong;
    }

    // broadcast from the last rank, all_gather of one int per rank, and a barrier.
    std::vector<int32_t> b(1000);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = rank == size - 1 ? static_cast<int32_t>(7 * i + 1) : -1;
    pg->broadcast(dcomm::Buffer(b), size - 1);
    for (std::size_t i = 0; i < b.size(); ++i) wrong += b[i] != static_cast<int32_t>(7 * i + 1);
    std::vector<int32_t> mine = {rank * 10 + 3};
    std::vector<int32_t> all(static_cast<std::size_t>(size));
    pg->all_gather(dcomm::Buffer(mine), dcomm::Buffer(all));
    for (int r = 0; r < size; ++r) wrong += all[static_cast<std::size_t>(r)] != r * 10 + 3;
    pg->barrier();

    std::printf("rank %d/%d (local %d/%d, node %d/%d): all_reduce, broadcast, all_gather, barrier: %s\n", rank, size,
                id.local_rank, id.local_world_size, id.node_rank, id.node_count,
                wrong == 0 ? "all results correct" : "WRONG RESULTS");
    if (rank == 0) {
      const double bytes = static_cast<double>(n * sizeof(double));
      std::printf("all_reduce of %zu doubles (%.1f MiB) on %d ranks: %s per call warmed (median of %d, %.2f GB/s "
                  "algbw); the first call took %s (it also sets up the group's connections)\n"
                  "for comparison: one copy of the same bytes inside one process takes %s; the cost model's "
                  "prediction is below\n",
                  n, bytes / (1 << 20), size, ms(times[1]).c_str(), kTimedCalls, bytes / times[1] / 1e9,
                  ms(times[0]).c_str(), ms(times[2]).c_str());
      std::printf("%s\n", pg->explain(dcomm::Collective::kAllReduce, n * sizeof(double)).c_str());
    }
    std::fflush(stdout);
    return wrong == 0 ? 0 : 1;
  } catch (const dcomm::Error& e) {
    std::fprintf(stderr, "dcomm-demo: %s error: %s\n", dcomm::to_string(e.code()), e.what());
    return 1;
  }
}
