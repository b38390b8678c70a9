#pragma once
// What algorithm files share: the supports() and cost shorthands, and the entry points of the algorithms that
// others fall back to. Each file defines run_<collective>_<name>, cost_<collective>_<name> and, where it does not
// handle every call, supports_<collective>_<name>, then registers its row (collectives/registry.hpp).

#include "collectives/registry.hpp"

namespace dcomm::coll {

// The algorithms other algorithms fall back to (a Bruck variant beyond its size limit runs one of these). An
// algorithm that nobody else calls needs no declaration: its row, in its own file, names its functions.
#define DCOMM_ALGORITHM(id)    \
  void run_##id(Context& ctx); \
  double cost_##id(const CostParams& p, double bytes, int size);

DCOMM_ALGORITHM(all_reduce_butterfly)
DCOMM_ALGORITHM(broadcast_binomial)
DCOMM_ALGORITHM(reduce_binomial)
DCOMM_ALGORITHM(scatter_binomial)
DCOMM_ALGORITHM(gather_binomial)
DCOMM_ALGORITHM(reduce_scatter_ring)
DCOMM_ALGORITHM(all_to_all_pairwise)
DCOMM_ALGORITHM(all_gather_ring)

#undef DCOMM_ALGORITHM

/// For algorithms that handle every call.
bool supports_any(const Args& args, const GroupView& view);
/// For algorithms without v-variant support (scatterv, gatherv, all_to_all_v).
bool supports_regular(const Args& args, const GroupView& view);

/// For the hierarchical algorithms (collectives/topology.hpp): regular calls on groups that span nodes.
bool supports_hier(const Args& args, const GroupView& view);
/// The representative of each node for a call rooted at `root`: the root on its node, the leader elsewhere.
std::vector<int> node_representatives(const Hierarchy& h, int root);
/// The view across nodes for a call rooted at a rank whose node is `root_node`, over `reps`: the group's leaders'
/// view when the root leads its node (built once), else `own`, filled with the view of `reps`.
const GroupView& across_view(const GroupView& group, const Hierarchy& h, const std::vector<int>& reps, int root_node,
                             GroupView& own);

/// Shorthands for the cost formulas: ceil(log2 P) and the (P-1)/P fraction.
double log2_rounds(int size);
double fraction(int size);
/// The engine's separate call check, ⌈log₂P⌉ rounds of a ~100-byte descriptor; 0 when checks are off.
double call_check_cost(const CostParams& p, int size);

/// all_reduce[shm_direct] and reduce[shm_direct] (collectives/shm_rounds.hpp): one node, host memory.
bool supports_shm_direct(const Args& args, const GroupView& view);
/// Their shared price (the root's path of reduce is every rank's path of all_reduce).
double cost_shm_rounds(const CostParams& p, double n, int size);
/// all_gather, all_to_all, broadcast, gather and scatter [shm_rounds] (shm_rounds_blocks): the price of their
/// rounds given the bytes the busiest rank copies into its window and out of the others' (n: the collective's n,
/// docs/algorithms.md) and the parts a writer writes a round (all_to_all, scatter: P-1; a round's bytes are about
/// n·written / the round's size).
double cost_shm_rounds_blocks(const CostParams& p, double n, int size, double copied_in, double reads, int written);
/// broadcast, all_gather, gather, scatter and all_to_all [shm_direct] (collectives/shm_pipe.hpp): regular calls in
/// host memory on one node. Their price: the start and end of the call (2α), a cache-line hand-off per piece on
/// the busiest rank's way (α/4 each), and the bytes that rank copies (in and out; memory copies priced like
/// reduction, γ, as all_reduce[shm_direct] does; like the other rows, not a rank's copy of its own block).
bool supports_shm_pipe(const Args& args, const GroupView& view);
double cost_shm_pipe(const CostParams& p, double copied, double pieces);
/// What reading `bytes` from windows that non-temporal stores filled adds (the group's probe: window_streamed_beta),
/// 0 where not measured (ranks sharing cores, whose rows store plain).
double cost_shm_pipe_streamed(const CostParams& p, double bytes);
/// gather's and scatter's: the root copies (P-1)/P·n, in k = (P-1)⌈(n/P) / piece⌉ pieces, and the last rank to be
/// served waits for one piece more; the (P-1)/P·n through the window read at cost_shm_pipe_streamed().
double cost_shm_pipe_rooted(const CostParams& p, double n, int size);
/// all_to_all's and reduce_scatter's: every rank copies (P-1)/P·n in and takes (P-1)/P·n out, a hand-off each way
/// for each of the k pieces of a block it takes (2α a piece: it publishes and takes on one core).
double cost_shm_pipe_exchange(const CostParams& p, double n, int size);

/// all_reduce[cma] and reduce[cma] (collectives/cma_slices.hpp) share when they apply and their price, given the
/// bytes a rank moves through process_vm_readv/writev and the system calls it makes per piece of its slice.
bool supports_cma(const Args& args, const GroupView& view);
/// The block-moving cma rows (all_gather, gather, scatter, all_to_all, broadcast): supports_cma, host output, not the v-variants.
bool supports_cma_blocks(const Args& args, const GroupView& view);
/// The cma reductions' price (all_reduce, reduce, reduce_scatter [cma]): `cma_bytes` through process_vm_readv/writev
/// at β, `copies_per_piece` system calls per 256 KiB piece of a slice, and `traffic` bytes of memory traffic at γ/4.
double cost_cma(const CostParams& p, double bytes, int size, double cma_bytes, double copies_per_piece, double traffic);
/// gather[cma] and scatter[cma]: the root and each block's other rank copy parts of it at once (cma_root_share).
double cost_cma_blocks(const CostParams& p, double n, int size);

}  // namespace dcomm::coll
