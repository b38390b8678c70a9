// reduce[shm_direct]: one node, straight through shared memory in rounds of at most 4 MiB
// (collectives/shm_rounds.hpp): every rank copies the others' parts of its input into its window, barrier, rank r
// reduces slice r in cache-sized pieces from its own input and the others' windows into its window (the root
// also into its output), barrier, the root copies the other slices out. When a rank cannot create its window,
// every rank logs why and runs binomial instead, from then on.
// Memory traffic per rank past the first round: the input read once, the root's output written once; binomial at
// P=2 moves 7n on the root (the engine's copy, the received copy, the reduction's reads and write).
// Cost: 2⌈log₂P⌉α per round + 2(P-1)/P·nβ (reads of the others' windows) + (1 + 2(P-1)/P)·nγ (the root copies
// the slices out, and the call ends with the root), plus the check it carries. Only for groups on one host and host
// memory.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {
constexpr uint32_t kFallbackStep = 1000;  // above every step shm_rounds_reduce uses
}  // namespace

void run_reduce_shm_direct(Context& c) {
  if (c.size() > 1 && shm_rounds_reduce(c, c.args.root)) return;
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
  if (c.size() > 1) binomial_reduce(c, c.work, c.work_count, c.args.root, kFallbackStep);
}

double cost_reduce_shm_direct(const CostParams& p, double n, int size) {
  // The root's path is all_reduce[shm_direct]'s: it copies the other slices out as every rank does there, and the
  // call ends when the root does. Priced without the root's copy-out and with the window reads at γ, the model
  // chose this row over cma at every size, where on 2-4 ranks it measured 1.3-2.8x cma's time from 256 KiB to
  // 4 MiB with non-temporal window stores (2026-11-25). With plain ones (Topology::cached_windows) it measured
  // 0.55-0.75x reduce[shm_pipe]'s time from 1 to 64 MiB on 2 ranks (session 7); the pipe's price now includes its
  // window reads where the probe measured them (session 27). This row then measured 1.5-1.9x cma's time at 1-16 MiB
  // on 2 ranks bound and 0.85-0.9x at 64 MiB, where the model prices it below cma: not yet priced for that.
  return cost_shm_rounds(p, n, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "shm_direct",
                         "one node: each rank reduces its slice straight from the others' shared memory, the root "
                         "copies the slices out",
                         supports_shm_direct, run_reduce_shm_direct, cost_reduce_shm_direct, /*fuses_check=*/true,
                         false, /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
