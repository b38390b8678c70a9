// gather[cma]: one node, single copies with cross-memory attach (collectives/cma_peers.hpp), each block's copy
// shared by the root and the block's owner:
//   1. Every rank sends every other the addresses of its block and (the root) of its output, on the call check's
//      rounds or in the group's slots (the group's first call also agrees that every rank may read and write every
//      other's memory; where one may not, every rank runs binomial instead, from then on).
//   2. At once: the root reads the first 1/(4P) of every other rank's block (cma_root_share: on 64-byte lines)
//      straight from where that rank holds it into its place in recv (process_vm_readv), then copies its own block
//      into place, while every other rank writes the rest of its block into its place in the root's recv
//      (process_vm_writev): both cores copy, where a single-copy reader (linear's message, OpenMPI's vader) moves
//      every block on the root's core and its own after them.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      or writes its buffers.
// In place at the root (its block inside recv: at its start or at its own place), the block goes to its place
// first; no copy touches that place.
// Cost: the check's rounds (carrying the addresses) + (1 + (P-2)/4)α for the last round + (P-1)α (the root's system
// calls) + (1 - 1/(4P))/P·nβ (n = the gathered bytes: an other rank's copy, all at once); where ranks share cores
// the copies do not overlap: (P-1)/P·nβ, and ⌈log₂P⌉α more (the address exchange waits for every rank to be
// scheduled).
// Regular gather (not gatherv), host memory, one host. Until session 29 the root read every block alone (by name
// only: about OpenMPI's time, 1.1-1.8x shm_direct's).

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_peers.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

void run_gather_cma(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const bool root = r == a.root;
  const std::size_t bytes = a.send.bytes();
  char* out = static_cast<char*>(a.recv.data);
  auto block = [&](int q) { return out + static_cast<std::size_t>(q) * bytes; };
  char* mine = static_cast<char*>(a.send.data);
  // In place at the root: its block to its place first (memmove: at root 0 the two are the same bytes).
  if (root && mine >= out && mine < out + a.recv.bytes()) {
    if (mine != block(r)) std::memmove(block(r), mine, bytes);
    mine = block(r);
  }
  if (p > 1) {
    CmaPeers peers;
    if (!cma_exchange(c, cma_use(c), mine, out, peers, 0)) {
      return run_instead(c, run_gather_binomial);
    }
    const CmaStatus status = cma_share_blocks(c, peers, a.root, /*to_root=*/true, out, mine, bytes);
    // The root's own block while the others still write the rest of theirs: no other rank touches its place.
    if (root && mine != block(r)) std::memcpy(block(r), mine, bytes);
    const CmaStatus s = cma_finish(c, status, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
    if (!s.ok()) cma_fail(c, peers, s);
  } else if (mine != block(r)) {
    std::memcpy(block(r), mine, bytes);
  }
}

}  // namespace

double cost_cma_blocks(const CostParams& p, double n, int size) {
  // Each other rank copies all of its block but the root's head (cma_root_share: 1/(4P) of it) while the root
  // copies the heads and its own block; where ranks share cores the copies do not overlap: all of them.
  const double copies = p.shared_cores ? fraction(size) * n : (1.0 - 1.0 / (4.0 * size)) * n / size;
  const double exchange = p.shared_cores ? log2_rounds(size) * p.alpha : 0.0;
  return (1.0 + 0.25 * (size - 2)) * p.alpha + (size - 1) * p.alpha + copies * p.beta + call_check_cost(p, size) +
         exchange;
}

namespace {

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "cma",
                         "one node: the root reads the head of every other rank's block while each writes the rest "
                         "into the root's output, single copies with process_vm_readv/writev",
                         supports_cma_blocks, run_gather_cma, cost_cma_blocks, /*fuses_check=*/true,
                         /*by_name_only=*/false}};

}  // namespace

}  // namespace dcomm::coll
