// The table. One row per algorithm; see docs/adding-an-algorithm.md.

#include "collectives/registry.hpp"

#include <cmath>
#include <map>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns.hpp"

namespace dcomm::coll {

bool supports_any(const Args& /*args*/, const GroupView& /*view*/) { return true; }
bool supports_regular(const Args& args, const GroupView& /*view*/) { return !args.vector_variant; }

double log2_rounds(int size) { return pattern::ceil_log2(size); }
double fraction(int size) { return size > 0 ? static_cast<double>(size - 1) / size : 0.0; }
double call_check_cost(const CostParams& p, int size) {
  return p.check_calls && size > 1 ? log2_rounds(size) * (p.alpha + 100 * p.beta) : 0.0;
}

const std::vector<Algorithm>& algorithm_table() {
  using C = Collective;
  static const std::vector<Algorithm> kTable = {
      {C::kAllReduce, "ring", "ring reduce-scatter then ring all-gather, pipelined; bandwidth-optimal", supports_any,
       run_all_reduce_ring, cost_all_reduce_ring},
      {C::kAllReduce, "tree", "binomial reduce to rank 0, then binomial broadcast; few rounds", supports_any,
       run_all_reduce_tree, cost_all_reduce_tree},
      {C::kAllReduce, "double_tree", "two complementary binary trees, pipelined (NCCL tree)", supports_any,
       run_all_reduce_double_tree, cost_all_reduce_double_tree},
      {C::kAllReduce, "butterfly", "recursive doubling, non-powers of two folded; latency-optimal", supports_any,
       run_all_reduce_butterfly, cost_all_reduce_butterfly},
      {C::kAllReduce, "rabenseifner", "recursive halving reduce-scatter, recursive doubling all-gather", supports_any,
       run_all_reduce_rabenseifner, cost_all_reduce_rabenseifner},
      {C::kAllReduce, "one_to_all", "everyone to rank 0, rank 0 back to everyone (parameter server)", supports_any,
       run_all_reduce_one_to_all, cost_all_reduce_one_to_all},
      {C::kAllReduce, "shm_direct", "one node: each rank reduces its slice straight from the others' shared memory",
       supports_all_reduce_shm_direct, run_all_reduce_shm_direct, cost_all_reduce_shm_direct, true},
      {C::kAllReduce, "bruck", "every rank gathers all inputs (Bruck) riding on the call check, reduces in rank order",
       supports_any, run_all_reduce_bruck, cost_all_reduce_bruck, true},
      {C::kBroadcast, "binomial", "binomial tree from the root", supports_any, run_broadcast_binomial,
       cost_broadcast_binomial},
      {C::kBroadcast, "scatter_allgather", "binomial scatter then ring all-gather (van de Geijn)", supports_any,
       run_broadcast_scatter_allgather, cost_broadcast_scatter_allgather},
      {C::kBroadcast, "chain", "pipelined chain from the root", supports_any, run_broadcast_chain,
       cost_broadcast_chain},
      {C::kBroadcast, "dissemination", "the root's data spreads on the call check's rounds (small messages)",
       supports_any, run_broadcast_dissemination, cost_broadcast_dissemination, true},
      {C::kReduce, "binomial", "binomial tree to the root", supports_any, run_reduce_binomial, cost_reduce_binomial},
      {C::kReduce, "linear", "everyone sends to the root, which combines in rank order", supports_any,
       run_reduce_linear, cost_reduce_linear},
      {C::kReduce, "bruck", "every rank gathers all inputs (Bruck) riding on the call check; the root combines them",
       supports_any, run_reduce_bruck, cost_reduce_bruck, true},
      {C::kReduce, "pipeline", "pipelined chain to the root; a piece's transfer overlaps the last one's reduction",
       supports_any, run_reduce_pipeline, cost_reduce_pipeline, false, true},
      {C::kScatter, "binomial", "binomial tree from the root (regular scatter)", supports_regular, run_scatter_binomial,
       cost_scatter_binomial},
      {C::kScatter, "linear", "the root sends each rank its block (scatter and scatterv)", supports_any,
       run_scatter_linear, cost_scatter_linear},
      {C::kScatter, "dissemination", "the root's blocks spread on the call check's rounds (small regular scatter)",
       supports_regular, run_scatter_dissemination, cost_scatter_dissemination, true},
      {C::kGather, "binomial", "binomial tree to the root (regular gather)", supports_regular, run_gather_binomial,
       cost_gather_binomial},
      {C::kGather, "linear", "each rank sends its block to the root (gather and gatherv)", supports_any,
       run_gather_linear, cost_gather_linear},
      {C::kGather, "bruck", "every rank gathers all blocks (Bruck) on the call check's rounds (small regular gather)",
       supports_regular, run_gather_bruck, cost_gather_bruck, true},
      {C::kAllGather, "ring", "ring, pipelined; bandwidth-optimal", supports_any, run_all_gather_ring,
       cost_all_gather_ring},
      {C::kAllGather, "recursive_doubling", "recursive doubling, non-powers of two folded", supports_any,
       run_all_gather_recursive_doubling, cost_all_gather_recursive_doubling},
      {C::kAllGather, "bruck", "Bruck's log-round all-gather for any group size; small ones ride on the call check",
       supports_any, run_all_gather_bruck, cost_all_gather_bruck, true},
      {C::kReduceScatter, "ring", "ring, pipelined; bandwidth-optimal", supports_any, run_reduce_scatter_ring,
       cost_reduce_scatter_ring},
      {C::kReduceScatter, "recursive_halving", "recursive halving, non-powers of two folded", supports_any,
       run_reduce_scatter_recursive_halving, cost_reduce_scatter_recursive_halving},
      {C::kReduceScatter, "bruck", "every rank gathers all vectors (Bruck) on the call check, combines its block",
       supports_any, run_reduce_scatter_bruck, cost_reduce_scatter_bruck, true},
      {C::kAllToAll, "pairwise", "P-1 rounds of pairwise exchange (all_to_all and all_to_all_v)", supports_any,
       run_all_to_all_pairwise, cost_all_to_all_pairwise},
      {C::kAllToAll, "bruck", "every rank gathers all send buffers (Bruck) on the call check's rounds (small, regular)",
       supports_regular, run_all_to_all_bruck, cost_all_to_all_bruck, true},
      {C::kBarrier, "dissemination", "log P rounds of tokens at doubling distances (the call check's own)",
       supports_any, run_barrier_dissemination, cost_barrier_dissemination, true},
  };
  return kTable;
}

const std::vector<const Algorithm*>& algorithms_for(Collective c) {
  static const auto kByCollective = [] {
    std::map<Collective, std::vector<const Algorithm*>> by;
    for (const Algorithm& a : algorithm_table()) by[a.collective].push_back(&a);
    return by;
  }();
  static const std::vector<const Algorithm*> kNone;
  auto it = kByCollective.find(c);
  return it == kByCollective.end() ? kNone : it->second;
}

std::size_t algorithm_index(const Algorithm& a) { return static_cast<std::size_t>(&a - algorithm_table().data()); }

const Algorithm* find_algorithm(Collective c, const std::string& name) {
  for (const Algorithm* a : algorithms_for(c)) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string algorithm_names(Collective c) {
  std::string out;
  for (const Algorithm* a : algorithms_for(c)) out += (out.empty() ? "" : ", ") + std::string(a->name);
  return out;
}

}  // namespace dcomm::coll

namespace dcomm {

std::vector<std::string> algorithms(Collective c) {
  std::vector<std::string> out;
  for (const coll::Algorithm* a : coll::algorithms_for(c)) out.emplace_back(a->name);
  return out;
}

}  // namespace dcomm
