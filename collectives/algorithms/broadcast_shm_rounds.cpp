// broadcast[shm_rounds]: one node, through the root's shared-memory window in rounds (collectives/shm_rounds.hpp,
// shm_rounds_blocks): the root copies round k's part of its buffer into its window half (k's parity), barrier,
// every other rank copies it out while the root copies round k + 1's in. Where the group's probe found plain window
// stores faster (the cores share a cache: collectives/window_probe.hpp) the others read the part from the root's
// cache, in rounds of 1 MiB; broadcast[shm_direct]'s pipe keeps non-temporal stores (its producer and readers work
// on neighbouring pieces at once, where plain stores measured slower: docs/algorithms.md "Window stores"). When a
// rank cannot create its window, every rank logs why and runs binomial instead, from then on.
// Cost: cost_shm_rounds_blocks (all_gather[shm_rounds]'s) with n copied in by the root and n read by the others.
// Host memory, one host.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_broadcast_shm_rounds(Context& c) {
  if (!shm_rounds_blocks(c)) run_instead(c, run_broadcast_binomial);
}

double cost_broadcast_shm_rounds(const CostParams& p, double n, int size) {
  return cost_shm_rounds_blocks(p, n, size, n, n, 1);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "shm_rounds",
                         "one node: the root copies its buffer into its shared memory in rounds, the others copy it out",
                         supports_shm_pipe, run_broadcast_shm_rounds, cost_broadcast_shm_rounds}};

}  // namespace

}  // namespace dcomm::coll
