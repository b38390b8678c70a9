// all_gather[shm_rounds]: one node, through every rank's shared-memory window in rounds
// (collectives/shm_rounds.hpp, shm_rounds_blocks): round k's part of each block into its rank's window, barrier,
// every rank copies the others' parts out of their windows while it copies its next part in. Where the group's
// probe found plain window stores faster (the cores share a cache: collectives/window_probe.hpp) the others read
// those parts from the writer's cache, in rounds of 1 MiB (all the parts together), so a byte crosses at cache
// speed twice where all_gather[cma]'s single copy reads it at memory speed. When a rank cannot create its window,
// every rank logs why and runs ring instead, from then on.
// Cost (cost_shm_rounds_blocks, all_to_all[shm_rounds]'s too): the separate check, a barrier a round (α/4, a slot
// exchange), the reads of the others' windows at β (with plain stores only up to kShmStreamingReadBytes, as
// all_reduce[shm_direct]'s), and the copies in (n/P) and out ((P-1)/P·n) at cache speed, γ/2 a byte. Regular
// all_gather, host memory, one host.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_all_gather_shm_rounds(Context& c) {
  if (!shm_rounds_blocks(c)) run_instead(c, run_all_gather_ring);
}

}  // namespace

double cost_shm_rounds_blocks(const CostParams& p, double n, int size, double copied_in, double reads, int written) {
  const bool cached = p.plain_windows(n);
  const double limit = static_cast<double>(cached ? kShmCachedRoundBytes : kShmRoundBytes);
  const double rounds = std::max(1.0, std::ceil(n * written / limit));
  return call_check_cost(p, size) + rounds * p.alpha / 4 +
         (cached ? cached_window_reads(p, reads) : reads * p.beta) +
         (copied_in + reads) * p.gamma / 2;
}

namespace {

double cost_all_gather_shm_rounds(const CostParams& p, double n, int size) {
  return cost_shm_rounds_blocks(p, n, size, n / size, fraction(size) * n, 1);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "shm_rounds",
                         "one node: every rank copies its block into its shared memory in rounds and the others' out",
                         supports_shm_pipe, run_all_gather_shm_rounds, cost_all_gather_shm_rounds}};

}  // namespace

}  // namespace dcomm::coll
