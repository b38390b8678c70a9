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
  const double rounds = std::max(1.0, std::ceil(n / static_cast<double>(kShmRoundBytes)));
  // The root's path is all_reduce[shm_direct]'s: it copies the other slices out as every rank does there, and the
  // call ends when the root does. Its reads of the others' windows (their parts of its slice, then their slices)
  // cross cores like the transport's copies, so they are priced at β. Priced at γ alone, without the root's
  // copy-out, the model chose this row over cma at every size, where on 2-4 ranks it measured 1.3-2.8x cma's
  // time from 256 KiB to 4 MiB (both: mpirun --bind-to core and none, 2026-11-25).
  return 2.0 * rounds * log2_rounds(size) * p.alpha + 2.0 * fraction(size) * n * p.beta +
         (1.0 + 2.0 * fraction(size)) * n * p.gamma + call_check_cost(p, size);
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
