// dcomm-demo: the README's main job. Every rank joins the world, runs a few collectives on data that differs per
// rank, checks each result against the value computed locally from the closed form, and prints what it did.
//   dcomm-run --nproc-per-node 4 -- dcomm-demo [elements]

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

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1u << 20) + 3;
  try {
    auto pg = dcomm::init();
    const int rank = pg->rank();
    const int size = pg->size();
    const auto& id = pg->identity();
    int wrong = 0;

    // all_reduce (sum) of n doubles.
    // The first call maps buffers and warms the links; the second is the one timed.
    std::vector<double> x(n);
    double t_allreduce = 0;
    for (int round = 0; round < 2; ++round) {
      for (std::size_t i = 0; i < n; ++i) x[i] = value(rank, i);
      auto t0 = std::chrono::steady_clock::now();
      pg->all_reduce(dcomm::Buffer(x), dcomm::ReduceOp::kSum);
      t_allreduce = seconds_since(t0);
    }
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

    double gbps = static_cast<double>(n * sizeof(double)) / t_allreduce / 1e9;
    std::printf("rank %d/%d (local %d/%d, node %d/%d): all_reduce of %zu doubles in %.3f ms (%.2f GB/s algbw), "
                "broadcast, all_gather, barrier: %s\n",
                rank, size, id.local_rank, id.local_world_size, id.node_rank, id.node_count, n, t_allreduce * 1e3,
                gbps, wrong == 0 ? "all results correct" : "WRONG RESULTS");
    if (rank == 0) std::printf("%s", pg->explain(dcomm::Collective::kAllReduce, n * sizeof(double)).c_str());
    std::fflush(stdout);
    return wrong == 0 ? 0 : 1;
  } catch (const dcomm::Error& e) {
    std::fprintf(stderr, "dcomm-demo: %s error: %s\n", dcomm::to_string(e.code()), e.what());
    return 1;
  }
}
