// all_reduce[shm_direct]: one node, straight through shared memory in rounds of at most 4 MiB
// (collectives/shm_rounds.hpp: copy the others' parts in, barrier, reduce this rank's slice in cache-sized pieces
// into its window and output, barrier, copy the other slices out). When a rank cannot create its window (a small
// /dev/shm), every rank logs why and runs ring instead, from then on.
// Memory traffic per rank past the first round: the input read once, the output written once (2n; non-temporal
// stores from 8 MiB), against 8.5n at P=2 when the whole call went through windows of its size (the engine's
// copy, in, the reduction, back, out).
// Cost: 2⌈log₂P⌉α per round + (1 + 2(P-1)/P)·nγ (memory copies priced like reduction; no link β): the setup is
// paid once; plus the check's ⌈log₂P⌉(α + 100β), which it no longer sends but keeps in its price (see the cost
// function). Only for groups on one host and host memory.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_rounds.hpp"
#include "collectives/shm_segments.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kFallbackStep = 1000;  // above every step shm_rounds_reduce uses

void ring_instead(Context& c) { ring_all_reduce_from_input(c, kFallbackStep); }

}  // namespace

bool supports_shm_direct(const Args& args, const GroupView& view) {
  return args.send.device.is_host() && group_on_one_host(view);
}

void run_all_reduce_shm_direct(Context& c) {
  if (c.size() == 1) {
    if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
    return;
  }
  if (!shm_rounds_reduce(c, -1)) ring_instead(c);
}

double cost_all_reduce_shm_direct(const CostParams& p, double n, int size) {
  // reduce[shm_direct]'s price (the same steps, every rank copying out): the reads of the others' windows cross
  // cores like the transport's copies, so they are priced at β. Priced at γ alone the model preferred this row to
  // cma, which measured 1.1-2.7x faster on 2 ranks at every size from 16 KiB to 64 MiB (2026-11-25, two quiet runs,
  // mpirun --bind-to core; docs/benchmark.md "Session 6"). Still with the separate check although the check is its
  // first barrier: without the check's share it undercuts all_reduce[bruck] on small calls that bruck serves faster.
  const double rounds = std::max(1.0, std::ceil(n / static_cast<double>(kShmRoundBytes)));
  return 2.0 * rounds * log2_rounds(size) * p.alpha + 2.0 * fraction(size) * n * p.beta +
         (1.0 + 2.0 * fraction(size)) * n * p.gamma + call_check_cost(p, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "shm_direct",
                         "one node: each rank reduces its slice straight from the others' shared memory",
                         supports_shm_direct, run_all_reduce_shm_direct, cost_all_reduce_shm_direct, true, false,
                         /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
