// all_reduce[cma]: one node, single copies with cross-memory attach (collectives/cma_slices.hpp).
//   1. Every rank sends every other its buffers' addresses (the group's first call also agrees that every rank
//      may read every other's memory; where one may not, every rank runs ring instead, from then on).
//   2. Rank r reduces slice r of P straight from the other ranks' inputs, in cache-sized pieces, and writes each
//      reduced piece, still in cache, into every rank's output.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still
//      reads its input or writes its output.
// The engine does not copy the input into the output first (takes_input). Memory traffic per rank, n bytes:
// reads n, writes n (the pieces read from the others stay in cache): 2n, where shm_direct moves
// 4n + (5P-1)/P·n (8.5n at P=2: the engine's copy, into the window, the reduction, back, out) and is capped at
// 16 MiB, and ring moves its messages through the shm transport's single copies plus the reductions.
// Cost: the call check's rounds (they carry the addresses), one round of P-1 small messages, 2(P-1) system
// calls per 256 KiB piece of a slice, 2(P-1)/P·n bytes through them (priced β like the shm transport's large
// messages, which are such copies too), and 2n bytes of memory traffic, priced 0.5·nγ (γ stands for the ~4
// bytes of traffic a byte reduced costs: two read, one written, one allocated).
// Chosen by the model since session 6 (docs/algorithms.md): measured again, it took 0.37-0.9x shm_direct's time
// from 64 KiB to 64 MiB on 2 ranks; below 32 KiB its two system calls a piece lose to the latency-bound rows.
// Only for groups on one host and host memory.

#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_slices.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_segments.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kFallbackStep = 1000;  // above the steps cma_reduce uses

void ring_instead(Context& c) { ring_all_reduce_from_input(c, kFallbackStep); }

}  // namespace

bool supports_cma(const Args& args, const GroupView& view) {
  // Not DCOMM_SHM_CMA: every rank must choose alike whatever its environment; the first call agrees on it.
  return args.send.device.is_host() && group_on_one_host(view);
}

bool supports_cma_blocks(const Args& args, const GroupView& view) {
  return supports_cma(args, view) && args.recv.device.is_host() && !args.vector_variant;
}

void run_all_reduce_cma(Context& c) {
  if (c.size() == 1) {
    if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
    return;
  }
  if (!cma_reduce(c, cma_use(c), -1, 0)) ring_instead(c);
}

double cost_cma(const CostParams& p, double n, int size, double cma_bytes, double copies_per_piece, double traffic) {
  // The check's rounds carry the addresses; then the finishing round, per piece of a slice `copies_per_piece`
  // system calls at α each (process_vm_readv/writev of a 256 KiB piece costs 1-2 µs on the VM measured: at 4 KiB
  // all_reduce[cma] took 4.6-5.3 µs where shm_direct took 2.0; priced at α/2 each the model chose cma from 16 KiB,
  // where it measured 1.5x shm_direct's time), the bytes they move priced like the shm transport's large messages
  // (β: they are its single copies too), and the call's memory traffic at γ/4 a byte (all_reduce: 2n, 0.5·nγ).
  const double pieces = std::ceil(n / size / kCmaPieceBytes);
  return call_check_cost(p, size) + (1.0 + 0.25 * (size - 2)) * p.alpha + pieces * copies_per_piece * p.alpha +
         cma_bytes * p.beta + 0.25 * traffic * p.gamma;
}

double cost_all_reduce_cma(const CostParams& p, double n, int size) {
  // Reads the others' parts of its slice and writes it back: 2(P-1) copies a piece.
  return cost_cma(p, n, size, 2.0 * fraction(size) * n, 2.0 * (size - 1), 2.0 * n);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "cma",
                         "one node: each rank reduces its slice from the others' inputs and writes it into their "
                         "outputs, single copies with process_vm_readv/writev",
                         supports_cma, run_all_reduce_cma, cost_all_reduce_cma, /*fuses_check=*/true, /*by_name_only=*/false,
                         /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
