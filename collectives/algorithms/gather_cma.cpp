// gather[cma]: one node, single copies with cross-memory attach (collectives/cma_peers.hpp): all_gather[cma] with
// the root the only reader.
//   1. Every rank sends every other the address of its block, on the call check's rounds or in the group's slots
//      (the group's first call also agrees that every rank may read every other's memory; where one may not, every
//      rank runs binomial instead, from then on).
//   2. The root reads every other rank's block straight from where that rank holds it into its place in recv, one
//      process_vm_readv per rank, then copies its own block into place; the others copy nothing.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while the root still reads
//      its block.
// In place at the root (its block inside recv: at its start or at its own place), the block goes to its place
// first and the reads land around it.
// Cost: the check's rounds (carrying the addresses) + (1 + (P-2)/4)α for the last round + (P-1)/P·nβ (the root's
// reads; n = the gathered bytes). Selected by name only: on 2 ranks bound to a core each it took about OpenMPI's
// time (which is this) and 1.1-1.8x shm_direct's at every size from 16 KiB to 64 MiB (rough, docs/algorithms.md):
// in shm_direct the others copy in while the root copies out, on different cores, where here the root copies all.
// Regular gather (not gatherv), host memory, one host.

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
  const char* mine = static_cast<const char*>(a.send.data);
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
    CmaStatus status;
    for (int s = 1; root && s < p && status.ok() && bytes > 0; ++s) {
      const int from = pattern::mod(r - s, p);
      status = cma_copy(c, peers, from, false, peers.hello[static_cast<std::size_t>(from)].input, block(from), bytes);
    }
    const CmaStatus s = cma_finish(c, status, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
    if (!s.ok()) cma_fail(c, peers, s);
  }
  if (root && mine != block(r)) std::memcpy(block(r), mine, bytes);
}

double cost_gather_cma(const CostParams& p, double n, int size) {
  return ((1.0 + 0.25 * (size - 2)) * p.alpha + fraction(size) * n * p.beta) + call_check_cost(p, size);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "cma",
                         "one node: the root reads every other rank's block straight into its output, single copies "
                         "with process_vm_readv",
                         supports_cma_blocks, run_gather_cma, cost_gather_cma, /*fuses_check=*/true,
                         /*by_name_only=*/true}};

}  // namespace

}  // namespace dcomm::coll
