#pragma once
// What every single-copy (cross-memory attach) algorithm on one node does around its copies:
//   1. every rank sends every other the addresses of its source and destination buffers, on the call check's
//      rounds (Bruck's gather of 32 bytes a rank), or, on a group with shared-memory slots (whose check the engine
//      ran in them), in one more slot exchange; on the group's first call the ranks also check that each may
//      read every other's memory and agree on the answer (DCOMM_SHM_CMA=0 on any rank says no), so that all of
//      them take the same path (exchange);
//   2. the algorithm's own process_vm_readv/writev copies (copy), each outcome kept as a CmaStatus;
//   3. every rank tells every other it is done, or how it failed (a round of messages, or a slot exchange); none
//      returns (letting its buffers go) before all have said so (finish). A failed read or write (a peer that exited:
//      ESRCH; a refused one: EPERM) reaches every rank, and each throws an error naming the rank that failed and the
//      rank whose memory it touched (fail).
// Users: all_reduce[cma], reduce[cma] and reduce_scatter[cma] (collectives/cma_slices.hpp), all_to_all[cma], all_gather[cma],
// broadcast[cma], gather[cma], scatter[cma].

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// What the group agreed on its first call; kept in the algorithm's state.
enum class CmaUse : int8_t { kUnknown, kYes, kNo };

/// The per-group state of every cma row: the agreement alone.
struct CmaState final : AlgorithmState {
  CmaUse use = CmaUse::kUnknown;
};
/// This row's agreement in the group (`c.state`), created on the group's first call.
inline CmaUse& cma_use(Context& c) {
  if (!*c.state) *c.state = std::make_unique<CmaState>();
  return static_cast<CmaState&>(**c.state).use;
}

/// One rank's announcement: where its source (`input`) and destination (`work`) buffers lie.
struct CmaHello {
  uint64_t input;
  uint64_t work;
  uint64_t probe_addr;   ///< where this process holds probe_value (the first call checks that peers can read it)
  uint64_t probe_value;
};

/// The outcome of a rank's copies, or the first failure it heard of.
struct CmaStatus {
  int32_t err = 0;      ///< 0, or the errno of the failed copy
  int32_t rank = -1;    ///< the group rank whose copy failed
  int32_t owner = -1;   ///< the group rank whose memory it read or wrote
  int32_t wrote = 0;    ///< 1: a write into owner's memory, 0: a read
  uint64_t bytes = 0;   ///< the size of the failed copy
  bool ok() const { return err == 0; }
};

/// Every rank's announcement and process id, by group rank.
struct CmaPeers {
  std::vector<CmaHello> hello;
  std::vector<int> pid;
};

/// Where a block moves between the root and one other rank (scatter[cma], gather[cma]), both copy part of it at
/// once: the root its first 1/(4P) (on 64-byte lines: 0 below 4P lines), the other rank the rest, while the root
/// also copies its own block. Session 30, 2 ranks bound, the root's own copy moved in among the others' (it came
/// after the last round before), mean us, root share 1/P / 1/(2P) / 1/(4P) / 1/(8P) / none: scatter 4 MiB 261-277 /
/// 229-231 / 185-203 / 180-188 / 193-209, 16 MiB 1,052-1,061 / 863-874 / 735-763 / 730-856 / 803-821, 64 MiB 7.6-8.4 /
/// 5.2-5.5 / 4.1-5.0 / 4.3-4.4 / 5.2-5.5 ms; gather alike (16 MiB 1,064-1,134 / 898-956 / 714-772 / 741-762 /
/// 810-825). On 3-4 ranks sharing 2 cores 1/(4P) against 1/P: 4-16 MiB 10-20% faster, 1 MiB 15-25% slower.
inline std::size_t cma_root_share(std::size_t bytes, int p) {
  return bytes / (4 * static_cast<std::size_t>(p)) & ~std::size_t{63};
}

/// Step 1, collective over the group, steps [step, step + 1 + ⌈log₂P⌉); carries the call check (Context::call)
/// on its rounds. Announces `input` and `work`. Returns false on every rank when the group cannot use cross-memory
/// attach (`use` then says so for the calls to come). With `use` already kNo it only runs the check.
bool cma_exchange(const Context& c, CmaUse& use, const void* input, const void* work, CmaPeers& peers, uint32_t step);

/// Step 2: copies `bytes` between `local` and `addr` in rank q's memory (a write into it when `write`).
CmaStatus cma_copy(const Context& c, const CmaPeers& peers, int q, bool write, uint64_t addr, char* local,
                   std::size_t bytes);

/// Step 2 of gather[cma] (`to_root`) and scatter[cma]: block q of `bytes` moves between the root's `blocks` (block q
/// at q·bytes: its output in a gather, its input in a scatter) and rank q's own buffer `own` (its input, or its
/// output), the root copying its head (cma_root_share) and rank q the rest, at once. Returns this rank's outcome.
CmaStatus cma_share_blocks(const Context& c, const CmaPeers& peers, int root, bool to_root, char* blocks, char* own,
                           std::size_t bytes);

/// Step 3, collective, one step: every rank's status to every other; returns the failure to report (its root
/// cause), or an ok status. Throws the wait's own error (a dead peer) where no rank reported a failure.
CmaStatus cma_finish(const Context& c, const CmaStatus& mine, uint32_t step);

/// Throws the RemoteError that names a failed copy `s`: who failed, on whose memory, why, and what to check.
[[noreturn]] void cma_fail(const Context& c, const CmaPeers& peers, const CmaStatus& s);

}  // namespace dcomm::coll
