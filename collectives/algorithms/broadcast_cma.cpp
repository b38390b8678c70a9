// broadcast[cma]: one node, the root's bytes copied once into every other rank's buffer with cross-memory attach
// (collectives/cma_peers.hpp), the copying shared by every rank instead of done by the readers alone:
//   1. Every rank sends every other the address of its buffer, on the call check's rounds or in the group's slots
//      (the group's first call also agrees that every rank may read and write every other's memory; where one may
//      not, every rank runs binomial instead, from then on).
//   2. The bytes split into P slices (cache-line aligned), slice q rank q's to move. A rank other than the root
//      reads its slice from the root's buffer into its own (process_vm_readv), then writes it from there into every
//      other non-root rank's buffer (process_vm_writev); the root writes its own slice into every other rank's
//      buffer. Every rank copies (P-1)/P of the bytes, all at once: on 2 ranks each core moves half, where a
//      single-copy reader (chain's message, OpenMPI's vader) moves all of it on one core.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      or writes its buffer.
// No two copies touch the same bytes: a rank writes slice q of another's buffer only where q is its own slice, and
// reads into its own buffer only its own slice.
// Cost: the check's rounds (carrying the addresses) + (1 + (P-2)/4)α for the last round + (P-1)α for the system
// calls (one a peer: a non-root rank's read and its P-2 writes, the root's P-1 writes; α each, as all_reduce[cma]
// prices them) + (P-1)/P·nβ; where ranks share cores, the copies do not overlap: (P-1)·nβ, and ⌈log₂P⌉α more for
// the exchange of addresses (a wait for every rank to be scheduled). Regular broadcast, host memory, one host.
// A candidate of the model and the tuner since session 29: 2 ranks bound (2026-12-07, dcomm-bench --algo all, mean
// us, 50-2000 calls) cma / the fastest other row / OpenMPI: 16 KiB 2.2 / 3.4 / 1.7-1.9, 64 KiB 3.4 / 3.9-4.1 /
// 3.9-4.0, 256 KiB 8.9 / 8.9 / 12.2, 1 MiB 25.6 / 30.1 / 91.8, 4 MiB 239 / 259 / 450, 16 MiB 900 / 1,053 / 1,758,
// 64 MiB 6.3 / 7.2 ms / 15.1 ms; below 8 KiB its fixed ~2 us (the exchanges and two system calls) loses to the
// slot's 0.3-0.5. Before session 29 it was by name only: then its two slot exchanges made 64 KiB 4.3-6.0 us against
// chain's 3.4-4.7, and its price left out the system calls.
#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_peers.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

// Slice q of n bytes among p ranks: [begin, end), boundaries on 64-byte lines (the last slice ends at n).
struct Slice {
  std::size_t begin, end;
};
Slice slice_of(std::size_t n, int p, int q) {
  auto edge = [&](int i) -> std::size_t {
    if (i >= p) return n;
    const std::size_t at = n / static_cast<std::size_t>(p) * static_cast<std::size_t>(i);
    return std::min(n, at & ~std::size_t{63});
  };
  return {edge(q), edge(q + 1)};
}

void run_broadcast_cma(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  char* buf = static_cast<char*>(a.send.data);
  const std::size_t n = a.send.bytes();
  CmaPeers peers;
  if (!cma_exchange(c, cma_use(c), buf, buf, peers, 0)) {
    return run_instead(c, run_broadcast_binomial);
  }
  CmaStatus status;
  const Slice mine = slice_of(n, p, r);
  const std::size_t bytes = mine.end - mine.begin;
  if (bytes > 0) {
    const auto root = static_cast<std::size_t>(a.root);
    if (r != a.root) {
      status = cma_copy(c, peers, a.root, false, peers.hello[root].input + mine.begin, buf + mine.begin, bytes);
    }
    // Then from this rank's own buffer into every other reader's, from r + 1 on (so the ranks spread their writes).
    for (int s = 1; s < p && status.ok(); ++s) {
      const int to = pattern::mod(r + s, p);
      if (to == a.root) continue;
      status = cma_copy(c, peers, to, true, peers.hello[static_cast<std::size_t>(to)].work + mine.begin,
                        buf + mine.begin, bytes);
    }
  }
  const CmaStatus s = cma_finish(c, status, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
  if (!s.ok()) cma_fail(c, peers, s);
}

double cost_broadcast_cma(const CostParams& p, double n, int size) {
  const double copies = p.shared_cores ? (size - 1) * n : fraction(size) * n;
  const double exchange = p.shared_cores ? log2_rounds(size) * p.alpha : 0.0;
  const double system_calls = (size - 1) * p.alpha;
  return ((1.0 + 0.25 * (size - 2)) * p.alpha + system_calls + copies * p.beta) + call_check_cost(p, size) + exchange;
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBroadcast, "cma",
                         "one node: every rank moves a slice of the root's bytes into every other rank's buffer, "
                         "single copies with process_vm_readv/writev",
                         supports_cma_blocks, run_broadcast_cma, cost_broadcast_cma, /*fuses_check=*/true,
                         /*by_name_only=*/false}};

}  // namespace

}  // namespace dcomm::coll
