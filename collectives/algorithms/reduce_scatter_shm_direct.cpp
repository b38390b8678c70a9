// reduce_scatter[shm_direct]: one node, pipelined through every rank's shared-memory window
// (collectives/shm_pipe.hpp), as all_to_all[shm_direct] with a reduction where it copies: piece index by piece
// index, each rank copies its next pieces of block q of its input into q's lane of slots, for every q, then
// combines every other rank's piece of its own block, as it lands, into its block of the engine's work buffer
// (which starts as its input). When a rank cannot create its window, every rank logs why and runs ring instead,
// from then on.
// Memory traffic per rank: (P-1)n/P copied in and (P-1)n/P read to combine, in parallel on every core, where ring
// moves (P-1)n/P by cross-memory attach in P-1 dependent steps.
// Cost: (2 + 4(P-1)k)α + 2(P-1)/P·nγ, k = the pieces of a block of n/P (cost_shm_pipe_exchange, all_to_all[shm_direct]'s;
// n = everything scattered). Only for one host and host memory.


#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

void run_reduce_scatter_shm_direct(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = c.args.recv.bytes();
  auto at = [&](int q) { return static_cast<std::size_t>(q) * bytes; };
  if (p == 1) return;  // the work buffer holds the input, which is the result
  ShmPipe* pipe = ShmPipe::open(c, PipeLanes::kPerPeer, "reduce_scatter[ring]");
  if (pipe == nullptr) return run_instead(c, run_reduce_scatter_ring);
  const char* in = c.input;
  char* mine = c.work + at(r);
  const std::size_t pieces = pipe->pieces(bytes);
  const PipeStores stores = reader_bound_stores(c);  // plain where ranks share cores (shm_pipe.hpp)
  for (std::size_t k = 0, put = 0; k < pieces; ++k) {
    for (; put < pieces && put <= k + pipe->ahead(); ++put) {
      for (int s = 1; s < p; ++s) pipe->put(c, (r + s) % p, in + at((r + s) % p), bytes, put, stores);
    }
    // Block r of the input is this rank's own part: the others' pieces combine into it where it is.
    for (int s = 1; s < p; ++s) pipe->reduce(c, pattern::mod(r - s, p), mine, bytes, k);
  }
}

double cost_reduce_scatter_shm_direct(const CostParams& p, double n, int size) {
  return cost_shm_pipe_exchange(p, n, size);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "shm_direct",
                         "one node: each rank copies pieces of its blocks into its shared memory, and combines the "
                         "others' for it",
                         supports_shm_pipe, run_reduce_scatter_shm_direct, cost_reduce_scatter_shm_direct,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
