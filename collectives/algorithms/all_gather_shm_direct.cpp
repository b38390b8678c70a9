// all_gather[shm_direct]: one node, pipelined through every rank's shared-memory window
// (collectives/shm_pipe.hpp): piece index by piece index, each rank copies its next pieces into a ring of slots in
// its window (up to ShmPipe::ahead() past the index), then copies the others' pieces of that index out into their
// places in `recv` as they land. Its own block goes into its place piece by piece as it is published, while still
// in cache (in place: first, whole). When a rank cannot create its window, every rank logs why and runs ring
// instead, from then on.
// Memory traffic per rank: its block in (n/P) and every other block out ((P-1)n/P), all at memory-copy speed and
// at the same time on every core, where ring moves (P-1)n/P by cross-memory attach (non-temporal stores from an
// 8 MiB result).
// Cost: (2 + k/4)α + (P-1)/P·nβ + nγ, k = P·⌈(n/P) / piece⌉ (cost_shm_pipe; n = the gathered bytes): where every
// rank owns its core, the reads of the others' windows cross cores like the transport's copies, so they are priced
// at β as all_reduce[shm_direct]'s are (priced at γ alone the model preferred this row to all_gather[cma], which
// measured 1.2-1.5x faster on 2 ranks bound to a core each, 256 KiB to 4 MiB). Where ranks share cores (3-4 ranks
// on 2), a reader often runs where the piece was written and the total work decides: the β term is left out, and
// this row measured 1.3-3x faster than cma there, 16 KiB to 4 MiB (rough, docs/algorithms.md). One host, host
// memory.

#include <cmath>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_all_gather_shm_direct(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = a.send.bytes();
  const GatheredBlocks block(a);
  ShmPipe* pipe = p > 1 ? ShmPipe::open(c, PipeLanes::kOne, "all_gather[ring]") : nullptr;
  if (p > 1 && pipe == nullptr) return run_instead(c, run_all_gather_ring);
  const bool stream = a.recv.bytes() >= kStreamFromBytes;
  // Bytes [at, at + len) of this rank's block into its place.
  auto own = [&](const char* from, std::size_t at, std::size_t len) {
    if (from == block(r) || len == 0) return;
    if (stream) {
      stream_copy(block(r) + at, from + at, len);
    } else {
      std::memcpy(block(r) + at, from + at, len);
    }
  };
  // In place, this rank's block goes to its place first and is published from there (own() then copies nothing).
  // Else each piece goes to its place right after it is published, while it is still in cache.
  const char* mine = own_block_first(a, r);
  const std::size_t pieces = p > 1 ? pipe->pieces(bytes) : 0;
  const std::size_t piece = p > 1 ? pipe->piece_for(bytes) : bytes;
  for (std::size_t k = 0, put = 0; k < pieces; ++k) {
    for (; put < pieces && put <= k + pipe->ahead(); ++put) {
      pipe->put(c, /*to=*/0, mine, bytes, put, PipeStores::kStream);
      own(mine, put * piece, std::min(piece, bytes - put * piece));
    }
    for (int s = 1; s < p; ++s) pipe->get(c, (r + s) % p, block((r + s) % p), bytes, k, stream);
  }
  if (pieces == 0) own(mine, 0, bytes);
  if (stream) stream_copy_fence();
}

// The reads of the others' windows priced at β go up to this many bytes; past it the single copies they are weighed
// against (cma's, ring's through the shm transport) run at memory speed, which their β leaves out, while this pipe
// overlaps its copy in and copy out on two cores: on 2 ranks at 64 MiB cma measured 11.4 ms against this row's 7.7
// (16 MiB: 1.89 against 1.83; 4 MiB: 0.21 against 0.28), and without the cap the model took cma there. The cap is
// fitted to those points (a quarter of the 32 MiB last-level cache): the model switches to this row from ~48 MiB.
constexpr double kCachedReadBytes = 8.0 * (1 << 20);

double cost_all_gather_shm_direct(const CostParams& p, double n, int size) {
  const double per_rank = n / size;
  return cost_shm_pipe(p, n, size * std::ceil(per_rank / static_cast<double>(kPipePieceBytes))) +
         (p.shared_cores ? 0.0 : std::min(fraction(size) * n, kCachedReadBytes) * p.beta);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "shm_direct",
                         "one node: every rank copies pieces of its block into its shared memory and the others' out",
                         supports_shm_pipe, run_all_gather_shm_direct, cost_all_gather_shm_direct,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
