// all_to_all[shm_rounds]: one node, through every rank's shared-memory window in rounds
// (collectives/shm_rounds.hpp, shm_rounds_blocks): round k's part of each block a rank sends into its window, in
// the lane of the rank it is for, barrier, every rank copies its parts out of the others' windows while it copies
// its next parts in. Where the group's probe found plain window stores faster (the cores share a cache:
// collectives/window_probe.hpp) a part crosses at cache speed twice where all_to_all[cma]'s single copy reads it
// at memory speed, as all_gather[shm_rounds] does. In place (send is recv) a block of recv is overwritten in a round
// only after that round's part of the same block of send went into the window. When a rank cannot create its
// window, every rank logs why and runs pairwise instead, from then on.
// Cost: cost_shm_rounds_blocks with (P-1)/P·n copied in. Regular all_to_all, host memory, one host.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_all_to_all_shm_rounds(Context& c) {
  if (!shm_rounds_blocks(c)) run_instead(c, run_all_to_all_pairwise);
}

double cost_all_to_all_shm_rounds(const CostParams& p, double n, int size) {
  return cost_shm_rounds_blocks(p, n, size, fraction(size) * n, fraction(size) * n, size - 1);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllToAll, "shm_rounds",
                         "one node: every rank copies its blocks for the others into its shared memory in rounds and "
                         "theirs for it out",
                         supports_shm_pipe, run_all_to_all_shm_rounds, cost_all_to_all_shm_rounds}};

}  // namespace

}  // namespace dcomm::coll
