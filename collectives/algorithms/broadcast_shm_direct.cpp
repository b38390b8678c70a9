// broadcast[shm_direct]: one node, pipelined through the root's shared-memory window (collectives/shm_pipe.hpp):
// the root copies the vector in, piece by piece, into a ring of slots in its window; every other rank copies each
// piece out into its buffer as it lands and acknowledges it, while the root copies in the next ones. When a rank
// cannot create its window, every rank logs why and runs binomial instead, from then on.
// Memory traffic: the root reads n and writes n into its window (which stays in cache), each other rank reads the
// window and writes n (non-temporal stores from 8 MiB); the copies in and out overlap, so the call takes about one
// copy of n and one piece, where binomial over cross-memory attach takes one single copy at its (slower) speed.
// Cost: (2 + k/4)α + (n + min(n, piece))γ, k = ⌈n / piece⌉ (cost_shm_pipe), + n at the probe's price of a byte read
// from a window filled by non-temporal stores where measured (cost_shm_pipe_streamed). Only for one host and host
// memory.

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_broadcast_shm_direct(Context& c) {
  const Args& a = c.args;
  if (c.size() == 1) return;
  ShmPipe* pipe = ShmPipe::open(c, PipeLanes::kOne, "broadcast[binomial]");
  if (pipe == nullptr) return run_instead(c, run_broadcast_binomial);
  char* buffer = static_cast<char*>(a.send.data);
  const std::size_t bytes = a.send.bytes();
  const bool stream = bytes >= kStreamFromBytes;
  for (std::size_t k = 0; k < pipe->pieces(bytes); ++k) {
    if (c.rank() == a.root) {
      pipe->put(c, /*to=*/0, buffer, bytes, k, PipeStores::kStream);
    } else {
      pipe->get(c, a.root, buffer, bytes, k, stream);
    }
  }
  if (stream) stream_copy_fence();
}

double cost_broadcast_shm_direct(const CostParams& p, double n, int /*size*/) {
  const double piece = static_cast<double>(kPipePieceBytes);
  return cost_shm_pipe(p, n + std::min(n, piece), std::ceil(n / piece)) + cost_shm_pipe_streamed(p, n);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "shm_direct",
                         "one node: the root copies pieces into its shared memory, the others copy them out at once",
                         supports_shm_pipe, run_broadcast_shm_direct, cost_broadcast_shm_direct,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
