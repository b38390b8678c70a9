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
/// Calls on device buffers (measured on an H100, two processes on the one GPU under MPS, 2026-11, docs/cuda.md):
/// a message costs ~25 us (sendrecv of 8 B one way: an IPC export, the receiver's copy, the poll of its event,
/// the ack) and 8 MiB more only ~3 us of it, a reduction kernel moves ~2.9 TB/s. β is priced for a link between
/// GPUs (NVLink-class, 200 GB/s), not the one GPU's memory, so that choices carry over to a GPU per rank.
inline constexpr double kDeviceAlpha = 25e-6;
inline constexpr double kDeviceBeta = 1.0 / 200e9;
inline constexpr double kDeviceGamma = 4.0 / 2.9e12;
/// `p` priced for a call on device buffers: the device's α, β, γ, and its pipelining unit (device_chunk_bytes).
CostParams device_priced(CostParams p);
/// Every algorithm of args.coll that supports the call, with its predicted time, in table order.
std::vector<Prediction> predict(const Args& args, const GroupView& view, const CostParams& params);
/// The cheapest of predict() other than by_name_only rows (ties go to the earlier row), or null when none
/// supports the call.
const Algorithm* cheapest(const Args& args, const GroupView& view, const CostParams& params);
/// A representative call of `c` moving `bytes` (uint8 elements) on `device`, for explain() and tests.
Args sample_args(Collective c, std::size_t bytes, int size, Device device = Device::host());

/// Reads {"alpha_s": ..., "beta_s_per_byte": ..., "gamma_s_per_byte": ..., "alpha_intra_s": ...,
/// "beta_intra_s_per_byte": ...} (each optional; the intra-node pair defaults to alpha and beta); throws
/// InvalidUsageError naming the file on a read or parse error.
CostParams load_tuning_file(const std::string& path, CostParams defaults);
/// The same format, for dcomm-bench to write.
std::string tuning_json(const CostParams& params);

/// The built-in α, β, γ of one node over shared memory (measured on a quiet machine, docs/algorithms.md): a probe
/// within kStableBand of them is taken to mean them.
inline constexpr double kOneNodeAlpha = 0.5e-6;
inline constexpr double kOneNodeBeta = 0.1e-9;
inline constexpr double kOneNodeGamma = 0.035e-9;
inline constexpr double kStableBand = 4.0;

/// Makes probed parameters the same from run to run, so that the same call gets the same algorithm every time
/// (a probe of a few ms varies by 2-6x on a busy machine, and choices near a crossover flipped with it): on one
/// node each parameter within a factor kStableBand of the built-in value becomes that value; any other (or any on
/// several nodes) is rounded to the nearest power of two. `source` gets a note of what was done.
CostParams stabilize(CostParams probed, bool one_node, std::string* source);

/// Collective over the group: measures α and β by a ring ping-pong of small and large messages and γ by a
/// timed local reduction (or reads DCOMM_TUNING_FILE), then agrees on the maximum of each over all ranks so
/// every rank selects alike, and stabilizes them (unless they come from a tuning file). On a group that spans nodes
/// a second ring within each node gives α_intra and β_intra; elsewhere they equal α and β. `source` says where the
/// numbers came from.
CostParams fit_cost_model(const GroupView& view, std::size_t chunk_bytes, std::string* source);

}  // namespace dcomm::coll
