// reduce_scatter[cma]: one node, single copies with cross-memory attach (collectives/cma_slices.hpp).
//   1. Every rank sends every other the addresses of its input and output (the group's first call also agrees that
//      every rank may read every other's memory; where one may not, every rank runs ring instead, from then on).
//   2. Rank r reads block r of every other rank's input with process_vm_readv, in cache-sized pieces, combines the
//      pieces in rank order with its own, and writes each result piece, still in cache, into its output.
//   3. Every rank tells every other it is done (or how it failed), so that none returns while another still reads
//      its input.
// The engine copies nothing first (takes_input) and nothing after (Context::wrote_output); in place (the output is
// the rank's own block of the input) only rank r ever touches block r. Memory traffic per rank, n bytes in all:
// reads n (its own block and, through process_vm_readv, (P-1)/P·n of the others'), writes n/P - where
// reduce_scatter[shm_rounds] copies (P-1)/P·n into its window as well and ring passes its partial sums on.
// Cost: the call check's rounds (they carry the addresses), one round of P-1 small messages, P-1 system calls per
// 256 KiB piece of a block, (P-1)/P·n bytes through them (β, as all_reduce[cma]'s), and (1 + 1/P)·n bytes of memory
// traffic at γ/4 a byte (all_reduce[cma]'s 2n at 0.5·nγ). Regular reduce_scatter, host memory, one host.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_slices.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kFallbackStep = 1000;  // above the steps cma_reduce_scatter uses

// Where this rank's result goes: its output, unless that overlaps a block of its input other than its own (in
// place in MPI's form, the result in block 0), which the others read until the last of them is done; its block
// of the engine's work buffer then, which the engine copies out after the call.
char* result_place(const Context& c) {
  const std::size_t at = static_cast<std::size_t>(c.rank()) * c.args.recv.count;
  const bool apart = disjoint(c.args.recv.data, c.args.recv.bytes(), c.input, c.work_count * c.esize());
  return apart || c.args.recv.data == c.at(c.input, at) ? static_cast<char*>(c.args.recv.data) : c.at(c.work, at);
}

void run_reduce_scatter_cma(Context& c) {
  char* out = result_place(c);
  if (c.size() > 1 && cma_reduce_scatter(c, cma_use(c), out, 0)) {
    c.wrote_output = out == c.args.recv.data;
    return;
  }
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);  // ring combines in the work buffer
  c.input = c.work;
  Context ring = c.on(c.view, kFallbackStep);
  run_reduce_scatter_ring(ring);
}

double cost_reduce_scatter_cma(const CostParams& p, double n, int size) {
  // P-1 reads a piece, (P-1)/P·n through them; reads n, writes n/P in all.
  return cost_cma(p, n, size, fraction(size) * n, size - 1.0, (1.0 + 1.0 / size) * n);
}

// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduceScatter, "cma",
                         "one node: each rank reduces its block straight from the others' inputs into its output, "
                         "single copies with process_vm_readv",
                         supports_cma_blocks, run_reduce_scatter_cma, cost_reduce_scatter_cma, /*fuses_check=*/true,
                         /*by_name_only=*/false, /*takes_input=*/true}};

}  // namespace

}  // namespace dcomm::coll
