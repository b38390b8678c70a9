// scatter[shm_direct]: one node, pipelined through the root's shared-memory window (collectives/shm_pipe.hpp):
// piece index by piece index, the root copies each rank's next piece into that rank's lane of slots in its window;
// each rank copies its pieces out into recv as they land; last, the root copies its own block. When a rank cannot
// create its window, every rank logs why and runs binomial instead, from then on.
// Memory traffic: the root copies (P-1)n/P in, each other rank n/P out, in parallel (non-temporal stores from an
// 8 MiB block).
// Cost: (2 + k/4)α + ((P-1)/P·n + min(n/P, piece))γ, k = (P-1)⌈(n/P) / piece⌉, + (P-1)/P·n at the probe's price of a
// byte read from a window filled by non-temporal stores where measured (cost_shm_pipe_rooted; n = the scattered bytes). Only for one host, host memory and scatter (not scatterv).

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_scatter_shm_direct(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int root = a.root;
  const std::size_t bytes = a.recv.bytes();
  auto block = [&](int q) { return static_cast<const char*>(a.send.data) + static_cast<std::size_t>(q) * bytes; };
  ShmPipe* pipe = p > 1 ? ShmPipe::open(c, PipeLanes::kPerPeer, "scatter[binomial]") : nullptr;
  if (p > 1 && pipe == nullptr) return run_instead(c, run_scatter_binomial);
  const bool stream = bytes >= kStreamFromBytes;
  for (std::size_t k = 0; p > 1 && k < pipe->pieces(bytes); ++k) {
    if (c.rank() != root) {
      pipe->get(c, root, static_cast<char*>(a.recv.data), bytes, k, stream);
      continue;
    }
    for (int s = 1; s < p; ++s) pipe->put(c, (root + s) % p, block((root + s) % p), bytes, k, PipeStores::kStream);
  }
  if (stream) stream_copy_fence();
  // Last: in place, the root's recv is the start of send, whose blocks had to go out first.
  if (c.rank() == root && a.recv.data != block(root)) std::memcpy(a.recv.data, block(root), bytes);
}

double cost_scatter_shm_direct(const CostParams& p, double n, int size) { return cost_shm_pipe_rooted(p, n, size); }

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "shm_direct",
                         "one node: the root copies pieces of each block into its shared memory, each rank copies "
                         "its own out at once",
                         supports_shm_pipe, run_scatter_shm_direct, cost_scatter_shm_direct, /*fuses_check=*/false,
                         /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
