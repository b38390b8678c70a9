// all_to_all[cma]: one node, single copies with cross-memory attach (collectives/cma_peers.hpp).
//   1. Every rank sends every other the address of its send buffer, on the call check's rounds (the group's first
//      call also agrees that every rank may read every other's memory; where one may not, every rank runs
//      pairwise instead, from then on).
//   2. Rank r reads block r of every other rank's send buffer straight into its place in recv, one
//      process_vm_readv per peer (from r-1 down, so the ranks spread their reads over the peers), then copies its
//      own block.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      its send buffer.
// Each byte is copied once, where shm_direct copies it into a window and out again, and pairwise moves the same
// single copies but pays the shm transport's announcement and acknowledgement per block on top of the check.
// In place, the send buffer is copied aside first (a peer reads it while this rank writes recv).
// Cost: the check's rounds (carrying the addresses) + (1 + (P-2)/4)α for the last round + (P-1)/P·nβ (n = the
// bytes a rank sends; the reads are the shm transport's large-message single copies, which α + β price there too).
// At P = 2 that is pairwise's price (one round, the same copies); this row comes first in the table and wins the
// tie: it measured as fast or faster (it does not wait for each partner in turn). Regular all_to_all (not
// all_to_all_v), host memory, one host.

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_peers.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

void run_all_to_all_cma(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const std::size_t bytes = a.send.bytes() / static_cast<std::size_t>(p);
  auto at = [&](int q) { return static_cast<std::size_t>(q) * bytes; };
  const char* src = static_cast<const char*>(a.send.data);
  char* out = static_cast<char*>(a.recv.data);
  Scratch aside;
  if (src == out && p > 1) {
    aside = c.scratch(a.send.count);
    c.copy(aside.data(), src, a.send.count);
    src = aside.data();
  }
  if (p > 1) {
    CmaPeers peers;
    if (!cma_exchange(c, cma_use(c), src, out, peers, 0)) {
      return run_instead(c, run_all_to_all_pairwise);
    }
    CmaStatus mine;
    for (int s = 1; s < p && mine.ok(); ++s) {
      const int from = pattern::mod(r - s, p);
      mine = cma_copy(c, peers, from, false, peers.hello[static_cast<std::size_t>(from)].input + at(r), out + at(from),
                      bytes);
    }
    const CmaStatus s = cma_finish(c, mine, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
    if (!s.ok()) cma_fail(c, peers, s);
  }
  if (src != out) std::memcpy(out + at(r), src + at(r), bytes);
}

double cost_all_to_all_cma(const CostParams& p, double n, int size) {
  // Summed in the order the model prices pairwise (its row, then the separate check), so that the two tie exactly
  // at P = 2 and the table's order decides.
  return ((1.0 + 0.25 * (size - 2)) * p.alpha + fraction(size) * n * p.beta) + call_check_cost(p, size);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllToAll, "cma",
                         "one node: each rank reads its block of every other rank's send buffer straight into its "
                         "output, single copies with process_vm_readv",
                         supports_cma_blocks, run_all_to_all_cma, cost_all_to_all_cma, /*fuses_check=*/true}};

}  // namespace

}  // namespace dcomm::coll
