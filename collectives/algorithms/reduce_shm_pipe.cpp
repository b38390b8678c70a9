// reduce[shm_pipe]: one node, pipelined through shared-memory windows (collectives/shm_pipe.hpp), as
// gather[shm_direct] is, with a reduction where the root copies: every other rank copies its input, piece by piece,
// into a lane of slots in its window that the root reads; the root, holding its own input in its output, combines
// each rank's piece into it as it lands, piece index by piece index, ranks in the order root+1, root+2, ... (every
// call on the same group and root combines in the same order). The copies in and the root's combining run at the
// same time on different cores, where reduce[cma] makes every rank read and write through process_vm_readv/writev
// (a fraction of memcpy's speed on the VM measured). When a rank cannot create its window, every rank logs why and
// runs binomial instead, from then on.
// The engine does not copy the input first (takes_input): a rank copies it into its window, the root into its output.
// Memory traffic: each other rank copies n in; the root combines (P-1)n, the busiest rank for P > 2.
// Cost: (2 + k/4)α + ((P-1)n + min(n, piece))γ, k = (P-1)⌈n / piece⌉ (cost_shm_pipe: the root combines (P-1)n and
// waits for one piece more). Only for one host, host memory and reduce.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

// The fallback, on a context from run_instead (which carries work, not input: copied there first).
void binomial_instead(Context& c) { binomial_reduce(c, c.work, c.work_count, c.args.root, 0); }

void run_reduce_shm_pipe(Context& c) {
  const int p = c.size();
  const int root = c.args.root;
  if (c.rank() == root && c.input != c.work) {
    c.copy(c.work, c.input, c.work_count);
    c.input = c.work;  // from here the root's input is its work buffer
  }
  if (p == 1) return;
  ShmPipe* pipe = ShmPipe::open(c, PipeLanes::kPerPeer, "reduce[binomial]");
  if (pipe == nullptr) {
    if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
    return run_instead(c, binomial_instead);
  }
  const std::size_t bytes = c.work_count * c.esize();
  // Pieces are multiples of 4 KiB but the last, so they hold whole elements.
  const PipeStores stores = reader_bound_stores(c);  // plain where ranks share cores (shm_pipe.hpp)
  for (std::size_t k = 0; k < pipe->pieces(bytes); ++k) {
    if (c.rank() != root) {
      pipe->put(c, root, c.input, bytes, k, stores);
      continue;
    }
    for (int s = 1; s < p; ++s) pipe->reduce(c, (root + s) % p, c.work, bytes, k);
  }
}

double cost_reduce_shm_pipe(const CostParams& p, double n, int size) {
  // The root reads every other rank's n bytes from their windows: priced as the rooted window rows price their
  // reads (cost_shm_pipe_rooted: the group's streamed window price, where its probe measured one). Priced at γ
  // alone, the model took this row for every reduce on 2 ranks from 16 KiB (DCOMM_TUNE=off, 2 ranks bound, two
  // runs): 10-15 us at 64 KiB against OpenMPI's 5-6, 51-65 at 256 KiB against cma's 16.6, 3.0-3.1 ms at 16 MiB
  // against cma's 1.77-1.79.
  const double piece = static_cast<double>(kPipePieceBytes);
  const double reads = (size - 1) * n;
  return cost_shm_pipe(p, reads + std::min(n, piece), (size - 1) * std::ceil(n / piece)) +
         cost_shm_pipe_streamed(p, reads);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "shm_pipe",
                         "one node: each rank copies pieces of its input into its shared memory, the root combines "
                         "them as they land",
                         supports_shm_pipe, run_reduce_shm_pipe, cost_reduce_shm_pipe, /*fuses_check=*/false,
                         /*by_name_only=*/false, /*takes_input=*/true}};

}  // namespace

}  // namespace dcomm::coll
