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

double cost_shm_rounds(const CostParams& p, double n, int size) {
  // The reads of the others' windows cross cores. With non-temporal stores into the windows they come from
  // memory, priced at β like the transport's copies: priced at γ alone the model preferred this row to cma, which
  // measured 1.1-2.7x faster on 2 ranks at every size from 16 KiB to 64 MiB (2026-11-25, session 6).
  // Still with the separate check although the check is its first barrier: without the check's share it
  // undercuts all_reduce[bruck] on small calls that bruck serves faster.
  const bool cached = p.plain_windows(n);
  const double round = static_cast<double>(cached ? kShmCachedRoundBytes : kShmRoundBytes);
  const double start = 2.0 * std::max(1.0, std::ceil(n / round)) * log2_rounds(size) * p.alpha + call_check_cost(p, size);
  if (!cached && p.window_streamed_beta >= 0) {
    // Non-temporal stores, where the probe measured them (not where ranks share cores): the copies at cache speed
    // as below, every byte's read at the probe's price (the lines come from memory). Priced at β instead, the
    // model took cma on 2 ranks at every size, where this row measured 0.75-0.9x its time from 64 KiB to 64 MiB
    // (session 16: 64 KiB 5.8-6.9 us against 7.8-9.4, 1 MiB 75-84 against 86-94, 16 MiB 2.19-2.21 ms against
    // 2.46-2.87, 64 MiB 9.2-9.4 against 10.8-11.1: 7.2 GB/s busbw against 6.1), in placements where the probe's
    // pattern took 62-116 us. Not the rows of shm_rounds_blocks: there cma was 15-30% faster at 256 KiB-4 MiB.
    return start + 2.0 * fraction(size) * n * p.window_streamed_beta +
           (fraction(size) + (size + 2.0) / (4.0 * size)) * n * p.gamma;
  }
  if (!cached) return start + 2.0 * fraction(size) * n * p.beta + (1.0 + 2.0 * fraction(size)) * n * p.gamma;
  // Where the group's probe found plain stores faster (Topology::cached_windows, collectives/window_probe.hpp) the
  // reads come from the writer's caches, in rounds of 1 MiB. A small call's reads wait on the lines one by one
  // (2 ranks, session 7: 0.20-0.25 ns a byte of the call from 16 to 128 KiB, 0.14 at 256 KiB), priced at β up to
  // kShmStreamingReadBytes; beyond, the lines stream, at the probe's 1 MiB price (cached_window_reads: 0.07 ns a
  // byte at 1 MiB there, priced free until session 28). Those copies at cache speed: a copy of b bytes (two bytes of traffic a byte, where γ stands for
  // about four) b·γ/2, the copy in and the copy out (P-1)/P·n each, and the reduction of the slice, n/P bytes out
  // of P inputs, (P+2)/4·γ a byte: at P = 2, n·γ. Measured on 2 ranks against cma (min of 4 alternating runs):
  // 64 KiB 13.1 / 14.5 us, 256 KiB 28.0 / 27.9-39.0, 1 MiB 73.5 / 114-122, 4 MiB 563 / 697-973, 16 MiB 2722 /
  // 4533-4582, 64 MiB 11.0 / 21.3 ms; the model takes this row from 16 KiB and from 1 MiB, cma in between.
  return start + 2.0 * fraction(size) * cached_window_reads(p, n) +
         (fraction(size) + (size + 2.0) / (4.0 * size)) * n * p.gamma;
}

double cost_all_reduce_shm_direct(const CostParams& p, double n, int size) { return cost_shm_rounds(p, n, size); }

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "shm_direct",
                         "one node: each rank reduces its slice straight from the others' shared memory",
                         supports_shm_direct, run_all_reduce_shm_direct, cost_all_reduce_shm_direct, true, false,
                         /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
