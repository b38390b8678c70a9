// all_gather[cma]: one node, single copies with cross-memory attach (collectives/cma_peers.hpp), as OpenMPI's
// vader component does it.
//   1. Every rank sends every other the address of its block, on the call check's rounds or in the group's slots
//      (the group's first call also agrees that every rank may read every other's memory; where one may not, every
//      rank runs ring instead, from then on).
//   2. Rank r reads every other rank's block straight from where that rank holds it into its place in recv, one
//      process_vm_readv per peer (from r-1 down, so the ranks spread their reads over the peers), then copies its
//      own block into its place.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      its block.
// Each byte a rank gathers is copied once, where shm_direct copies it into a window and out again.
// In place (the block inside recv: at its start or at the rank's own place), the block goes to its place first and
// is announced from there, before the reads overwrite the start of recv.
// Cost: the check's rounds (carrying the addresses) + (1 + (P-2)/4)α for the last round + (P-1)/P·nβ (n = the
// gathered bytes; the reads are the shm transport's large-message single copies, which α + β price there too, as
// ring's messages are), all_to_all[cma]'s price. Its own block's copy is left out, as every all_gather row makes
// it and none prices it. At P = 2 that is ring's price (one round, the same bytes); this row comes first in the
// table and wins the tie: it measured 1.5-2x faster than ring from 64 KiB (ring pipelines its one message in
// chunks, each announced and acknowledged). Where ranks share cores, ⌈log₂P⌉α more for the exchange of addresses
// (a wait for every rank to be scheduled). Regular all_gather, host memory, one host.

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_peers.hpp"
#include "collectives/layout.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

void run_all_gather_cma(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = a.send.bytes();
  const GatheredBlocks block(a);
  const char* mine = own_block_first(a, r);
  if (p > 1) {
    CmaPeers peers;
    if (!cma_exchange(c, cma_use(c), mine, block.out, peers, 0)) {
      return run_instead(c, run_all_gather_ring);
    }
    CmaStatus status;
    for (int s = 1; s < p && status.ok() && bytes > 0; ++s) {
      const int from = pattern::mod(r - s, p);
      status = cma_copy(c, peers, from, false, peers.hello[static_cast<std::size_t>(from)].input, block(from), bytes);
    }
    const CmaStatus s = cma_finish(c, status, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
    if (!s.ok()) cma_fail(c, peers, s);
  }
  if (mine != block(r)) std::memcpy(block(r), mine, bytes);
}

double cost_all_gather_cma(const CostParams& p, double n, int size) {
  // Summed in the order the model prices ring (its row, then the separate check), so that the two tie exactly at
  // P = 2 and the table's order decides. Where ranks share cores, the exchange of addresses is a wait for every
  // rank to be scheduled, priced as a check's rounds (on 3 ranks on 2 cores this row took 19 us at 16 KiB where
  // shm_direct took 9 and ring 11).
  const double exchange = p.shared_cores ? log2_rounds(size) * p.alpha : 0.0;
  return ((1.0 + 0.25 * (size - 2)) * p.alpha + fraction(size) * n * p.beta) + call_check_cost(p, size) + exchange;
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "cma",
                         "one node: each rank reads every other rank's block straight into its output, single "
                         "copies with process_vm_readv",
                         supports_cma_blocks, run_all_gather_cma, cost_all_gather_cma, /*fuses_check=*/true}};

}  // namespace

}  // namespace dcomm::coll
