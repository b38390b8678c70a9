#pragma once
// The entry points of every algorithm file, for the table in collectives/registry.cpp. Each file defines
// run_<collective>_<name>, cost_<collective>_<name> and, where it does not handle every call,
// supports_<collective>_<name>.

#include "collectives/registry.hpp"

namespace dcomm::coll {

#define DCOMM_ALGORITHM(id)    \
  void run_##id(Context& ctx); \
  double cost_##id(const CostParams& p, double bytes, int size);

DCOMM_ALGORITHM(all_reduce_ring)
DCOMM_ALGORITHM(all_reduce_tree)
DCOMM_ALGORITHM(all_reduce_double_tree)
DCOMM_ALGORITHM(all_reduce_butterfly)
DCOMM_ALGORITHM(all_reduce_rabenseifner)
DCOMM_ALGORITHM(all_reduce_one_to_all)
DCOMM_ALGORITHM(all_reduce_shm_direct)
DCOMM_ALGORITHM(all_reduce_bruck)
DCOMM_ALGORITHM(broadcast_binomial)
DCOMM_ALGORITHM(broadcast_scatter_allgather)
DCOMM_ALGORITHM(broadcast_chain)
DCOMM_ALGORITHM(broadcast_dissemination)
DCOMM_ALGORITHM(reduce_binomial)
DCOMM_ALGORITHM(reduce_linear)
DCOMM_ALGORITHM(reduce_bruck)
DCOMM_ALGORITHM(reduce_pipeline)
DCOMM_ALGORITHM(scatter_linear)
DCOMM_ALGORITHM(scatter_binomial)
DCOMM_ALGORITHM(scatter_dissemination)
DCOMM_ALGORITHM(gather_linear)
DCOMM_ALGORITHM(gather_binomial)
DCOMM_ALGORITHM(gather_bruck)
DCOMM_ALGORITHM(all_gather_ring)
DCOMM_ALGORITHM(all_gather_recursive_doubling)
DCOMM_ALGORITHM(all_gather_bruck)
DCOMM_ALGORITHM(reduce_scatter_ring)
DCOMM_ALGORITHM(reduce_scatter_recursive_halving)
DCOMM_ALGORITHM(reduce_scatter_bruck)
DCOMM_ALGORITHM(all_to_all_pairwise)
DCOMM_ALGORITHM(all_to_all_bruck)
DCOMM_ALGORITHM(barrier_dissemination)

#undef DCOMM_ALGORITHM

/// shm_direct needs every rank on one host and host memory.
bool supports_all_reduce_shm_direct(const Args& args, const GroupView& view);

/// For algorithms that handle every call.
bool supports_any(const Args& args, const GroupView& view);
/// For algorithms without v-variant support (scatterv, gatherv, all_to_all_v).
bool supports_regular(const Args& args, const GroupView& view);

/// Shorthands for the cost formulas: ceil(log2 P) and the (P-1)/P fraction.
double log2_rounds(int size);
double fraction(int size);
/// The engine's separate call check, ⌈log₂P⌉ rounds of a ~100-byte descriptor; 0 when checks are off.
double call_check_cost(const CostParams& p, int size);

}  // namespace dcomm::coll
