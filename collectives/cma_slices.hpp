#pragma once
// Single-copy reduction among the ranks of one node with cross-memory attach (process_vm_readv): a rank reads
// another rank's buffer where it lies, so no byte passes through a shared intermediate buffer in memory. The
// algorithms built on it (all_reduce[cma], reduce[cma]) run:
//   1. cma_exchange: every rank sends every other the addresses of its input and its work buffer (one small
//      message each). On the group's first call the ranks also check that each may read every other's memory
//      and agree on the answer (DCOMM_SHM_CMA=0 says no), so that all of them take the same path.
//   2. cma_reduce_slice: rank r reduces slice r of P nearly equal slices into its work buffer, in cache-sized
//      pieces: for each piece it reads the other ranks' pieces into a small buffer that stays in cache and
//      combines them in rank order (so every rank's result has the same bits whoever reduced it).
//   3. the algorithm gathers reduced slices with cma_fetch, one single copy per slice.
// cma_signal's small all-to-all messages order the phases and carry failures: a read that fails (a peer that
// exited: ESRCH; permission taken away: EPERM) is reported to every rank that waits on this one, and each throws
// an error naming the rank that could not read and the rank it read from.

#include <cstdint>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

/// What the group agreed on its first call; kept in the algorithm's state.
enum class CmaUse : int8_t { kUnknown, kYes, kNo };

/// Every rank's buffers for one call (addresses in the owners' processes), by group rank.
struct PeerBuffers {
  std::vector<uint64_t> input;
  std::vector<uint64_t> work;
  std::vector<int> pid;
};

/// The outcome of this rank's reads, or the first failure it heard of.
struct CmaStatus {
  int32_t err = 0;      ///< 0, or the errno of the failed read
  int32_t reader = -1;  ///< the group rank that could not read
  int32_t owner = -1;   ///< the group rank whose memory it read
  uint64_t bytes = 0;   ///< the size of the failed read
  bool ok() const { return err == 0; }
};

/// Collective over the group, steps [step, step + 1 + ⌈log₂P⌉). Exchanges the buffers' addresses into `out`;
/// on the first call (`use` unknown) also settles `use`. Returns false on every rank when the group cannot
/// use CMA (then nothing was read, and the caller takes another path).
bool cma_exchange(const Context& c, CmaUse& use, PeerBuffers& out, uint32_t step);

/// Reduces slice [offset, offset + count) of every rank's input into this rank's work buffer (see above).
CmaStatus cma_reduce_slice(const Context& c, const PeerBuffers& b, std::size_t offset, std::size_t count);

/// Copies elements [offset, offset + count) of rank q's work buffer into this rank's work buffer.
CmaStatus cma_fetch(const Context& c, const PeerBuffers& b, int q, std::size_t offset, std::size_t count);

/// Sends `mine` to every rank of `to` and waits for the status of every rank of `from` (one step); returns
/// `mine` when it is a failure (without waiting: the failure may be a dead peer), else the first failure heard,
/// else success.
CmaStatus cma_signal(const Context& c, const std::vector<int>& to, const std::vector<int>& from, CmaStatus mine,
                     uint32_t step);

/// Throws when `s` is a failure: RemoteError naming the reader, the owner, the bytes and what to check.
void cma_check(const Context& c, const PeerBuffers& b, const CmaStatus& s);

/// Every group rank but this one.
std::vector<int> other_ranks(const Context& c);

/// Whether DCOMM_SHM_CMA allows cross-memory attach in this process.
bool cma_allowed_by_env();

}  // namespace dcomm::coll
