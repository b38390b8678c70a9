// reduce[cma]: one node, single copies with cross-memory attach (collectives/cma_slices.hpp).
//   1. Every rank sends every other its buffers' addresses (the group's first call also agrees that every rank
//      may read every other's memory; where one may not, every rank runs binomial instead, from then on).
//   2. Rank r reduces slice r of P straight from the other ranks' inputs, in cache-sized pieces, and writes each
//      reduced piece, still in cache, into the root's output. The root writes nothing back, so its slice is larger
//      (weights 2P against 2P-1: 4/7 at P = 2, measured fastest; collectives/cma_slices.cpp).
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still
//      reads its input.
// The engine does not copy the input first (takes_input). Copies through process_vm_readv/writev: the root's P-1
// reads of its slice, (P-1)·2P/(2P + (P-1)(2P-1))·n (4n/7 at P = 2), where it also reads its own part and writes the
// result in its memory; off the root P copies of a smaller slice (6n/7 at P = 2); the root's output is written once.
// binomial at P=2 moves 7n on the root (the engine's copy, the received copy, the
// reduction's reads and write), half of it through the transport's cross-memory attach. Priced like
// all_reduce[cma] with the root's bytes through process_vm_readv.
// Only for groups on one host and host memory.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_slices.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kFallbackStep = 1000;  // above the steps cma_reduce uses

}  // namespace

void run_reduce_cma(Context& c) {
  if (c.size() > 1) {
    if (cma_reduce(c, cma_use(c), c.args.root, 0)) return;
  }
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
  if (c.size() > 1) binomial_reduce(c, c.work, c.work_count, c.args.root, kFallbackStep);
}

double cost_reduce_cma(const CostParams& p, double n, int size) {
  // The slices' weights balance the ranks' measured times (collectives/cma_slices.cpp), so the call takes the root's:
  // P-1 reads of its slice of n·2P/(2P + (P-1)(2P-1)) through process_vm_readv (4n/7 at P = 2), besides the reading
  // and writing in its own memory that nγ/2 prices. (Priced by the other ranks' bytes, P reads and writes of a slice
  // of n(2P-1)/(2P + ...), 6n/7 at P = 2, binomial and shm_direct undercut it at 16 KiB, where it measured 3.0-3.7 us
  // against their 3.9 and 4.5.)
  // Where ranks share cores their copies do not run side by side, and the weights balance nothing: priced by the
  // larger bytes, the others' (4 ranks on 2 cores, 64 KiB: cma 42-57 us, shm_pipe 28-31; sessions 8 and 30).
  const double weights = 2.0 * size + (size - 1) * (2.0 * size - 1.0);
  const double copies = (p.shared_cores ? size * (2.0 * size - 1.0) : (size - 1) * 2.0 * size) / weights;
  // Where ranks share cores the root's result is done only when every rank has been scheduled to write its slice,
  // where reduce[shm_pipe] (its rival there) combines whatever has landed: ⌈log₂P⌉α more, as for all_gather[cma]'s
  // exchange of addresses (4 ranks on 2 cores, 64 KiB: cma 57 us, shm_pipe 31, shm_direct 32; session 8).
  const double scheduled = p.shared_cores ? log2_rounds(size) * p.alpha : 0.0;
  return cost_cma(p, n, size, copies * n, static_cast<double>(size - 1) + 1.0, 2.0 * n) + scheduled;  // P-1 reads, one write
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "cma",
                         "one node: each rank reduces its slice from the others' inputs and writes it into the "
                         "root's output, single copies with process_vm_readv/writev",
                         supports_cma, run_reduce_cma, cost_reduce_cma, /*fuses_check=*/true, false,
                         /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
