#pragma once
// The α–β–γ cost model: predicted times per algorithm, the cheapest choice, and where α, β, γ come from (a
// short probe over the group at Engine::create, or a tuning file). See docs/algorithms.md.

#include <string>
#include <vector>

#include "collectives/engine.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

struct Prediction {
  const Algorithm* algorithm;
  double seconds;
};

/// The model's n for a call: the bytes of the full result (all_reduce, broadcast, reduce: the vector;
/// all_gather, gather: everything gathered; reduce_scatter, scatter: everything scattered; all_to_all: what a
/// rank sends). Zero for barrier.
double model_bytes(const Args& args, int size);
/// `p` with the group's shape filled in (nodes, ranks per node), as the hierarchical rows need.
CostParams priced_for(const GroupView& view, CostParams p);
/// Every algorithm of args.coll that supports the call, with its predicted time, in table order.
std::vector<Prediction> predict(const Args& args, const GroupView& view, const CostParams& params);
/// The cheapest of predict() other than by_name_only rows (ties go to the earlier row), or null when none
/// supports the call.
const Algorithm* cheapest(const Args& args, const GroupView& view, const CostParams& params);
/// A representative call of `c` moving `bytes` (uint8 elements), for explain() and tests.
Args sample_args(Collective c, std::size_t bytes, int size);

/// Reads {"alpha_s": ..., "beta_s_per_byte": ..., "gamma_s_per_byte": ..., "alpha_intra_s": ...,
/// "beta_intra_s_per_byte": ...} (each optional; the intra-node pair defaults to alpha and beta); throws
/// InvalidUsageError naming the file on a read or parse error.
CostParams load_tuning_file(const std::string& path, CostParams defaults);
/// The same format, for dcomm-bench to write.
std::string tuning_json(const CostParams& params);

/// Collective over the group: measures α and β by a ring ping-pong of small and large messages and γ by a
/// timed local reduction (or reads DCOMM_TUNING_FILE), then agrees on the maximum of each over all ranks so
/// every rank selects alike. On a group that spans nodes a second ring within each node gives α_intra and
/// β_intra; elsewhere they equal α and β. `source` says where the numbers came from.
CostParams fit_cost_model(const GroupView& view, std::size_t chunk_bytes, std::string* source);

}  // namespace dcomm::coll
