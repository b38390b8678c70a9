// all_gather[shm_direct]: one node, pipelined through every rank's shared-memory window
// (collectives/shm_pipe.hpp): piece index by piece index, each rank copies its next pieces into a ring of slots in
// its window (up to ShmPipe::ahead() past the index), then copies the others' pieces of that index out into their places in `recv` as they land; its own
// block goes into its place last (in place: first). When a rank cannot create its window, every rank logs why and runs ring instead,
// from then on.
// Memory traffic per rank: its block in (n/P) and every other block out ((P-1)n/P), all at memory-copy speed and
// at the same time on every core, where ring moves (P-1)n/P by cross-memory attach (non-temporal stores from an
// 8 MiB result).
// Cost: (2 + k/4)α + nγ, k = P·⌈(n/P) / piece⌉ (cost_shm_pipe; n = the gathered bytes). Only for one host and
// host memory.

#include <cmath>
#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_pipe.hpp"
#include "collectives/stream_copy.hpp"

namespace dcomm::coll {

namespace {

void run_all_gather_shm_direct(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = a.send.bytes();
  char* out = static_cast<char*>(a.recv.data);
  auto block = [&](int q) { return out + static_cast<std::size_t>(q) * bytes; };
  ShmPipe* pipe = p > 1 ? ShmPipe::open(c, PipeLanes::kOne, "all_gather[ring]") : nullptr;
  if (p > 1 && pipe == nullptr) return run_instead(c, run_all_gather_ring);
  const bool stream = a.recv.bytes() >= kStreamFromBytes;
  auto own = [&](const char* from) {
    if (from == block(r)) return;
    if (stream) {
      stream_copy(block(r), from, bytes);
    } else {
      std::memcpy(block(r), from, bytes);
    }
  };
  const char* mine = static_cast<const char*>(a.send.data);
  // In place (send inside recv, at its start or at this rank's block), this rank's block goes to its place first,
  // and is published from there, before the others' land where it was. Else last, so that the others' first
  // pieces come first.
  const bool inside = mine >= out && mine < out + a.recv.bytes();
  if (inside) own(mine), mine = block(r);
  const std::size_t pieces = p > 1 ? pipe->pieces(bytes) : 0;
  for (std::size_t k = 0, put = 0; k < pieces; ++k) {
    for (; put < pieces && put <= k + pipe->ahead(); ++put) pipe->put(c, /*to=*/0, mine, bytes, put);
    for (int s = 1; s < p; ++s) pipe->get(c, (r + s) % p, block((r + s) % p), bytes, k, stream);
  }
  if (!inside) own(mine);
  if (stream) stream_copy_fence();
}

double cost_all_gather_shm_direct(const CostParams& p, double n, int size) {
  const double per_rank = n / size;
  return cost_shm_pipe(p, n, size * std::ceil(per_rank / static_cast<double>(kPipePieceBytes)));
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "shm_direct",
                         "one node: every rank copies pieces of its block into its shared memory and the others' out",
                         supports_shm_pipe, run_all_gather_shm_direct, cost_all_gather_shm_direct,
                         /*fuses_check=*/false, /*by_name_only=*/false, /*takes_input=*/false, /*uses_slots=*/false}};

}  // namespace

}  // namespace dcomm::coll
