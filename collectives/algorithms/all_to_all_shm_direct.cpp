// all_to_all[shm_direct]: one node, pipelined through every rank's shared-memory window
// (collectives/shm_pipe.hpp): piece index by piece index, each rank copies its next pieces of the block for rank
// q into q's lane of slots in its window (up to ShmPipe::ahead() past the index), for every q, then copies every
// other rank's piece for it out into its place in recv as it lands; last, its own block. In place needs no copy
// aside: a piece of recv is overwritten only after the same piece of send went into the window.
// When a rank cannot create its window, every rank logs why and runs pairwise instead, from then on.
// Memory traffic per rank: (P-1)n/P in and (P-1)n/P out, in parallel on every core (non-temporal stores from an
// 8 MiB result), where pairwise moves (P-1)n/P by cross-memory attach.
// Cost: (2 + 2k)α + 2(P-1)/P·nγ, k = 2(P-1)·(the pieces of a block of n/P: ShmPipe::pieces), n = the bytes a rank
// sends; a hand-off per piece at 2α, not α/4 (see the cost function). Only for one host, host memory and all_to_all
// (not all_to_all_v).

#include <algorithm>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_all_to_all_shm_direct(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = a.send.bytes() / static_cast<std::size_t>(p);
  const char* in = static_cast<const char*>(a.send.data);
  char* out = static_cast<char*>(a.recv.data);
  auto at = [&](int q) { return static_cast<std::size_t>(q) * bytes; };
  ShmPipe* pipe = p > 1 ? ShmPipe::open(c, PipeLanes::kPerPeer, "all_to_all[pairwise]") : nullptr;
  if (p > 1 && pipe == nullptr) return run_instead(c, run_all_to_all_pairwise);
  const bool stream = a.recv.bytes() >= kStreamFromBytes;
  const std::size_t pieces = p > 1 ? pipe->pieces(bytes) : 0;
  const PipeStores stores = reader_bound_stores(c);  // plain where ranks share cores (shm_pipe.hpp)
  for (std::size_t k = 0, put = 0; k < pieces; ++k) {
    for (; put < pieces && put <= k + pipe->ahead(); ++put) {
      for (int s = 1; s < p; ++s) pipe->put(c, (r + s) % p, in + at((r + s) % p), bytes, put, stores);
    }
    for (int s = 1; s < p; ++s) {
      const int from = pattern::mod(r - s, p);
      pipe->get(c, from, out + at(from), bytes, k, stream);
    }
  }
  if (in != out) {
    if (stream) {
      stream_copy(out + at(r), in + at(r), bytes);
    } else {
      std::memcpy(out + at(r), in + at(r), bytes);
    }
  }
  if (stream) stream_copy_fence();
}

double cost_all_to_all_shm_direct(const CostParams& p, double n, int size) { return cost_shm_pipe_exchange(p, n, size); }

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllToAll, "shm_direct",
                         "one node: each rank copies pieces of its blocks into its shared memory, and the others' "
                         "for it out",
                         supports_shm_pipe, run_all_to_all_shm_direct, cost_all_to_all_shm_direct,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
