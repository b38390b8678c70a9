// reduce_scatter[shm_rounds]: one node, through every rank's shared-memory window in rounds
// (collectives/shm_rounds.hpp, shm_rounds_reduce_scatter): round k's part of each other rank's block of the input
// into that rank's lane of the window half (k's parity), barrier, every rank reduces round k's part of its own block
// from its input and the others' lanes, while the next round's parts go in. Where the group's probe found plain
// window stores faster (the cores share a cache: collectives/window_probe.hpp) the parts are read from the writers'
// caches, in rounds of 1 MiB; reduce_scatter[shm_direct]'s pipe keeps non-temporal stores. It reads the input where
// it lies (takes_input: the engine copies nothing first). When a rank cannot create its window, every rank logs why
// and runs ring instead, from then on.
// Cost: the separate check, a barrier a round (α/4), the reads of the others' lanes ((P-1)/P·n: with plain stores at
// the probe's small price up to kShmStreamingReadBytes, else β), the copies in ((P-1)/P·n at γ/2) and the reduction
// of n/P bytes out of P inputs ((P+2)/4·γ a byte, as all_reduce[shm_direct]'s). Regular reduce_scatter, host
// memory, one host.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/shm_rounds.hpp"

namespace dcomm::coll {

namespace {

void run_reduce_scatter_shm_rounds(Context& c) {
  if (shm_rounds_reduce_scatter(c)) return;
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);  // ring combines in the work buffer
  c.input = c.work;
  run_instead(c, run_reduce_scatter_ring);
}

double cost_reduce_scatter_shm_rounds(const CostParams& p, double n, int size) {
  const bool cached = p.plain_windows(n);
  const double limit = static_cast<double>(cached ? kShmCachedRoundBytes : kShmRoundBytes);
  const double reads = fraction(size) * n;
  const double rounds = std::max(1.0, std::ceil(reads / limit));
  const double read_price = cached ? cached_window_reads(p, reads) : reads * p.beta;
  return call_check_cost(p, size) + rounds * p.alpha / 4 + read_price +
         (reads / 2 + (size + 2.0) / (4.0 * size) * n) * p.gamma;
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "shm_rounds",
                         "one node: every rank copies its blocks for the others into its shared memory in rounds and "
                         "reduces its own from theirs",
                         supports_shm_pipe, run_reduce_scatter_shm_rounds, cost_reduce_scatter_shm_rounds,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/true}};

}  // namespace

}  // namespace dcomm::coll
