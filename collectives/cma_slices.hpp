#pragma once
// Single-copy reduction among the ranks of one node with cross-memory attach (process_vm_readv/writev): a rank
// reads the other ranks' inputs and writes their outputs where they lie, so no byte passes through a shared
// intermediate buffer in memory. all_reduce[cma] and reduce[cma] are this, with every rank or only the root
// receiving the result, and reduce_scatter[cma] with each rank receiving its own slice:
//   1. Every rank sends every other the addresses of its input and of its work buffer (the output)
//      (collectives/cma_peers.hpp: on the call check's rounds, or in the group's slots). On the group's first call
//      the ranks also agree that each may read every other's memory (DCOMM_SHM_CMA=0 on any rank says no).
//   2. Rank r owns slice r of P slices (nearly equal; reduce's root, which writes nothing back, a larger one). Piece by piece (cache sized) it reads the other ranks'
//      pieces into a small buffer that stays in cache, combines them in rank order (every rank's result then
//      has the same bits whoever reduced it), and writes the piece, still in cache, into the work buffer of each
//      rank that receives the result. Only rank r touches slice r anywhere, which is what makes in place safe.
//   3. Every rank tells every other it is done, or how it failed; none returns (letting its buffers go) before
//      all have said so. A failed read or write (a peer that exited: ESRCH; a refused one: EPERM) reaches every
//      rank, and each throws an error naming the rank that failed and the rank whose memory it touched.
// Memory traffic per rank for n bytes (all_reduce): reads n (its slice of every input), writes its slice to every
// rank, n; 2n in all against the 2.5n a read-back gather would take.

#include <cstddef>

#include "collectives/cma_peers.hpp"
#include "collectives/context.hpp"

namespace dcomm::coll {

/// The piece of a slice combined at once: the other rank's piece and the running sum stay in a core's L2 (1 MiB
/// on the machines measured) while they are combined and written out.
inline constexpr std::size_t kCmaPieceBytes = std::size_t{256} << 10;

/// Collective over the group, steps [step, step + 3 + ⌈log₂P⌉); carries the call check (Context::call: the
/// addresses ride on its rounds). Reduces every rank's Context::input into the work buffer of `root`, or of every
/// rank when `root` < 0. Returns false on every rank, having run the check but moved nothing, when the group
/// cannot use cross-memory attach (`use` then says so for the calls to come); throws RemoteError on every rank
/// when a copy failed.
bool cma_reduce(const Context& c, CmaUse& use, int root, uint32_t step);

/// reduce_scatter[cma]: the same steps, where rank r's slice is block r of the inputs (args.recv.count elements at
/// r·count) and the result goes into `out` (this rank's output, which may be its own block r of the input: in place)
/// alone. Returns false, having run the check, where the group cannot use cross-memory attach.
bool cma_reduce_scatter(const Context& c, CmaUse& use, char* out, uint32_t step);

}  // namespace dcomm::coll
