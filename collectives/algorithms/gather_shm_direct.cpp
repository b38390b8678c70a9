// gather[shm_direct]: one node, pipelined through shared-memory windows (collectives/shm_pipe.hpp): every other
// rank copies its block, piece by piece, into a ring of slots in its window (a lane for the root); the root copies
// its own block into place first, then, piece index by piece index, each rank's piece out into its place as it
// lands. When a rank cannot create its window, every rank logs why and runs binomial instead, from then on.
// Memory traffic: each rank copies its block in (n/P), the root copies (P-1)n/P out, the copies in parallel
// (non-temporal stores from an 8 MiB result).
// Cost: (2 + k/4)α + ((P-1)/P·n + min(n/P, piece))γ, k = (P-1)⌈(n/P) / piece⌉, + (P-1)/P·n at the probe's price of a
// byte read from a window filled by non-temporal stores where measured (cost_shm_pipe_rooted; n = the gathered bytes). Only for one host, host memory and gather (not gatherv).

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_gather_shm_direct(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int root = a.root;
  const std::size_t bytes = a.send.bytes();
  auto block = [&](int q) { return static_cast<char*>(a.recv.data) + static_cast<std::size_t>(q) * bytes; };
  // First: in place, the root's data sits at the start of recv, where another rank's block is about to land.
  if (c.rank() == root && a.send.data != block(root)) std::memcpy(block(root), a.send.data, bytes);
  if (p == 1) return;
  ShmPipe* pipe = ShmPipe::open(c, PipeLanes::kPerPeer, "gather[binomial]");
  if (pipe == nullptr) return run_instead(c, run_gather_binomial);
  const bool stream = c.rank() == root && a.recv.bytes() >= kStreamFromBytes;
  const PipeStores stores = reader_bound_stores(c);  // plain where ranks share cores (shm_pipe.hpp)
  for (std::size_t k = 0; k < pipe->pieces(bytes); ++k) {
    if (c.rank() != root) {
      pipe->put(c, root, static_cast<const char*>(a.send.data), bytes, k, stores);
      continue;
    }
    for (int s = 1; s < p; ++s) pipe->get(c, (root + s) % p, block((root + s) % p), bytes, k, stream);
  }
  if (stream) stream_copy_fence();
}

double cost_gather_shm_direct(const CostParams& p, double n, int size) { return cost_shm_pipe_rooted(p, n, size); }

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "shm_direct",
                         "one node: each rank copies pieces of its block into its shared memory, the root copies "
                         "them out at once",
                         supports_shm_pipe, run_gather_shm_direct, cost_gather_shm_direct, /*fuses_check=*/false,
                         /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
