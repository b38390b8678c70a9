// scatter[cma]: one node, single copies with cross-memory attach (collectives/cma_peers.hpp), each block's copy
// shared by the root and the block's receiver (gather[cma] the other way):
//   1. Every rank sends every other the addresses of its receive buffer and (the root) of its input, on the call
//      check's rounds or in the group's slots (the group's first call also agrees that every rank may read and
//      write every other's memory; where one may not, every rank runs binomial instead, from then on).
//   2. At once: the root writes the first 1/(4P) of every other rank's block (cma_root_share: on 64-byte lines)
//      straight into that rank's receive buffer (process_vm_writev), then copies its own block (where its receive
//      buffer lies apart from its input), while every other rank reads the rest of its block from the root's input
//      (process_vm_readv): both cores copy, where a single-copy reader (OpenMPI's vader) moves each block on its
//      own core while the root copies its own.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      or writes its buffers. In place the root copies its own block only then (its receive buffer may overlap
//      blocks the others read until now).
// Cost: gather[cma]'s (cost_cma_blocks).
// Regular scatter (not scatterv), host memory, one host.

#include <cstring>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_peers.hpp"
#include "collectives/layout.hpp"
#include "collectives/patterns.hpp"
#include "collectives/shm_pipe.hpp"

namespace dcomm::coll {

namespace {

void run_scatter_cma(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const bool root = r == a.root;
  const std::size_t bytes = a.recv.bytes();
  char* in = static_cast<char*>(a.send.data);
  char* mine = static_cast<char*>(a.recv.data);
  auto block = [&](int q) { return in + static_cast<std::size_t>(q) * bytes; };
  // The root's own block while the others read theirs, where its receive buffer lies apart from its input (which
  // they read); in place, after every rank is done.
  const bool apart = root && bytes > 0 && disjoint(mine, bytes, in, a.send.bytes());
  bool copied = false;
  if (p > 1) {
    CmaPeers peers;
    if (!cma_exchange(c, cma_use(c), in, mine, peers, 0)) {
      return run_instead(c, run_scatter_binomial);
    }
    const CmaStatus status = cma_share_blocks(c, peers, a.root, /*to_root=*/false, in, mine, bytes);
    if (apart) {
      std::memcpy(mine, block(r), bytes);
      copied = true;
    }
    const CmaStatus s = cma_finish(c, status, 2 + static_cast<uint32_t>(pattern::ceil_log2(p)));
    if (!s.ok()) cma_fail(c, peers, s);
  }
  if (root && !copied && mine != block(r) && bytes > 0) std::memmove(mine, block(r), bytes);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "cma",
                         "one node: the root writes the head of every other rank's block while each reads the rest "
                         "from the root's input, single copies with process_vm_readv/writev",
                         supports_cma_blocks, run_scatter_cma, cost_cma_blocks, /*fuses_check=*/true,
                         /*by_name_only=*/false}};

}  // namespace

}  // namespace dcomm::coll
