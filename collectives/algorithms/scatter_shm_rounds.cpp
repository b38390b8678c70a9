// scatter[shm_rounds]: one node, through the root's shared-memory window in rounds (collectives/shm_rounds.hpp,
// shm_rounds_blocks): the root copies round k's part of each other rank's block into that rank's lane of its window
// half (k's parity), barrier, every other rank copies its part out while the root copies round k + 1's in; the
// root's own block goes to its recv last (in place, recv is the start of send, whose blocks go out first). Where
// the group's probe found plain window stores faster (collectives/window_probe.hpp) the others read the parts from
// the root's cache, in rounds of 1 MiB; scatter[shm_direct]'s pipe keeps non-temporal stores. When a rank cannot
// create its window, every rank logs why and runs binomial instead, from then on.
// Cost: cost_shm_rounds_blocks with (P-1)/P·n copied in by the root and n/P read by each other rank. Regular
// scatter, host memory, one host.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_scatter_shm_rounds(Context& c) {
  if (!shm_rounds_blocks(c)) run_instead(c, run_scatter_binomial);
}

double cost_scatter_shm_rounds(const CostParams& p, double n, int size) {
  return cost_shm_rounds_blocks(p, n, size, fraction(size) * n, n / size, size - 1);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "shm_rounds",
                         "one node: the root copies each rank's block into its shared memory in rounds, each rank "
                         "copies its own out",
                         supports_shm_pipe, run_scatter_shm_rounds, cost_scatter_shm_rounds}};

}  // namespace

}  // namespace dcomm::coll
