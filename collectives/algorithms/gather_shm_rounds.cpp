// gather[shm_rounds]: one node, through the shared-memory windows in rounds (collectives/shm_rounds.hpp,
// shm_rounds_blocks): every other rank copies round k's part of its block into its window half (k's parity),
// barrier, the root copies the parts out into their places while the others copy round k + 1's in; the root's own
// block goes to its place first. Where the group's probe found plain window stores faster (the cores share a cache:
// collectives/window_probe.hpp) the root reads the parts from the writers' caches, in rounds of 1 MiB;
// gather[shm_direct]'s pipe keeps non-temporal stores. When a rank cannot create its window, every rank logs why
// and runs binomial instead, from then on.
// Cost: cost_shm_rounds_blocks with n/P copied in by each other rank and (P-1)/P·n read by the root. Regular gather,
// host memory, one host.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_gather_shm_rounds(Context& c) {
  if (!shm_rounds_blocks(c)) run_instead(c, run_gather_binomial);
}

double cost_gather_shm_rounds(const CostParams& p, double n, int size) {
  return cost_shm_rounds_blocks(p, n, size, n / size, fraction(size) * n, 1);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "shm_rounds",
                         "one node: every rank copies its block into its shared memory in rounds, the root copies "
                         "them out",
                         supports_shm_pipe, run_gather_shm_rounds, cost_gather_shm_rounds}};

}  // namespace

}  // namespace dcomm::coll
