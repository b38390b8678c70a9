#include "collectives/cost_model.hpp"

#include "collectives/slots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <dcomm/error.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

double model_bytes(const Args& a, int size) {
  auto bytes = [](const Buffer& b) { return static_cast<double>(b.bytes()); };
  switch (a.coll) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kAllToAll:
      return bytes(a.send);
    case Collective::kAllGather:
      return bytes(a.send) * size;
    case Collective::kReduceScatter:
      return bytes(a.recv) * size;
    case Collective::kScatter:
      return bytes(a.recv) * size;
    case Collective::kGather:
      return bytes(a.send) * size;
    case Collective::kBarrier:
      return 0;
  }
  return 0;
}

CostParams priced_for(const GroupView& view, CostParams p) {
  if (view.hierarchy) {
    const Topology& t = view.hierarchy->topo;
    p.nodes = t.node_count();
    p.local = t.max_local;
    p.min_local = t.min_local;
    p.shared_cores = p.shared_cores || t.shares_cores;
    p.cached_windows = p.cached_windows || t.cached_windows;
    p.cached_small_windows = p.cached_small_windows || t.cached_small_windows || t.cached_windows;
    // The small pattern's copies, in and out, are priced at γ/2 a byte each by the rows (cost_shm_rounds_blocks):
    // what is left is the read's wait on lines crossing cores.
    if (p.cached_small_windows && t.window_small_seconds_per_byte > 0 && p.window_read_beta < 0) {
      p.window_read_beta = std::max(t.window_small_seconds_per_byte - p.gamma, 0.0);
    }
    // The 1 MiB pattern moves 1 MiB a rank in and 1 MiB out (window_probe.hpp); on a grid of half powers of two,
    // so that two measurements a few percent apart price alike (whole powers moved 88 ps a byte to 116).
    auto on_grid = [&](double pattern_seconds) {
      const double per_byte = pattern_seconds / double(std::size_t{1} << 20);
      return std::max(std::exp2(std::round(2 * std::log2(per_byte)) / 2) - p.gamma, 0.0);
    };
    if (t.window_streamed_seconds > 0 && p.window_streamed_beta < 0) {
      p.window_streamed_beta = on_grid(t.window_streamed_seconds);
    }
    if (t.window_plain_seconds > 0 && p.window_plain_beta < 0) p.window_plain_beta = on_grid(t.window_plain_seconds);
  }
  return p;
}

CostParams device_priced(CostParams p) {
  p.alpha = p.alpha_intra = kDeviceAlpha;
  p.beta = p.beta_intra = kDeviceBeta;
  p.gamma = kDeviceGamma;
  p.chunk_bytes = p.device_chunk_bytes;
  p.cached_windows = false;  // no window row runs on device memory
  p.cached_small_windows = false;
  p.window_read_beta = -1;
  p.window_streamed_beta = -1;
  p.window_plain_beta = -1;
  return p;
}

std::vector<Prediction> predict(const Args& args, const GroupView& view, const CostParams& group_params) {
  std::vector<Prediction> out;
  const CostParams host = priced_for(view, group_params);
  const CostParams params = on_device(args) ? device_priced(host) : host;
  double n = model_bytes(args, view.size);
  // Paid by those that do not carry it themselves; its messages are host ones whatever the buffers.
  const double check = call_check_cost(host, view.size);
  // A reduction's engine copies the input into the work buffer before a row that does not read the input where it
  // lies (engine.cpp, run_reducing; a no-op in place): a memcpy of n bytes, two bytes of memory traffic per byte
  // where γ stands for about four. Left out, the model could not tell all_reduce[cma] (which reads the input in
  // place) from ring on 2 ranks, where cma measured 1.3-1.5x faster from 256 KiB. reduce_scatter's rows that do not
  // take the input copy all of it too (reducing_call.cpp).
  const bool reducing = args.coll == Collective::kAllReduce || args.coll == Collective::kReduce ||
                        args.coll == Collective::kReduceScatter;
  auto engine_copy = [&](const Algorithm& a) {
    return reducing && !a.takes_input && args.red.op != ReduceOp::kPreMulSum ? 0.5 * n * params.gamma : 0.0;
  };
  for (const Algorithm* a : algorithms_for(args.coll)) {
    if (!a->supports(args, view)) continue;
    if (a->uses_slots && !slots_take(args, view)) {
      // What it runs instead (slots.hpp): the check, then its fallback.
      const Algorithm& f = slot_fallback(args.coll);
      out.push_back({a, f.cost(params, n, view.size) + check + engine_copy(f)});
      continue;
    }
    out.push_back({a, a->cost(params, n, view.size) + (a->fuses_check ? 0.0 : check) + engine_copy(*a)});
  }
  return out;
}

const Algorithm* cheapest(const Args& args, const GroupView& view, const CostParams& params) {
  const Algorithm* best = nullptr;
  double best_t = 0;
  for (const Prediction& p : predict(args, view, params)) {
    if (p.algorithm->by_name_only) continue;
    if (best == nullptr || p.seconds < best_t) best = p.algorithm, best_t = p.seconds;
  }
  return best;
}

Args sample_args(Collective c, std::size_t bytes, int size, Device device) {
  Args a;
  a.coll = c;
  a.send.device = a.recv.device = device;
  auto per_rank = bytes / static_cast<std::size_t>(size > 0 ? size : 1);
  switch (c) {
    case Collective::kAllGather:
    case Collective::kGather:
      a.send.count = per_rank;
      break;
    case Collective::kReduceScatter:
    case Collective::kScatter:
      a.recv.count = per_rank;
      break;
    case Collective::kBarrier:
      break;
    default:
      a.send.count = bytes;
      break;
  }
  return a;
}

CostParams load_tuning_file(const std::string& path, CostParams p) {
  std::ifstream in(path);
  if (!in) {
    throw InvalidUsageError(fmt::format("DCOMM_TUNING_FILE '{}' cannot be read; unset it to probe the links", path));
  }
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    p.alpha = j.value("alpha_s", p.alpha);
    p.beta = j.value("beta_s_per_byte", p.beta);
    p.gamma = j.value("gamma_s_per_byte", p.gamma);
    // Within a node: the file's own numbers, else the same as between ranks (one link class).
    p.alpha_intra = j.value("alpha_intra_s", p.alpha);
    p.beta_intra = j.value("beta_intra_s_per_byte", p.beta);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidUsageError(
        fmt::format("DCOMM_TUNING_FILE '{}' is not valid: {}; expected "
                    "{{\"alpha_s\": ..., \"beta_s_per_byte\": ..., \"gamma_s_per_byte\": ...}} (and optionally "
                    "\"alpha_intra_s\", \"beta_intra_s_per_byte\" for links within a node)",
                    path, e.what()));
  }
  if (!(p.alpha >= 0 && p.beta >= 0 && p.gamma >= 0 && p.alpha_intra >= 0 && p.beta_intra >= 0)) {
    throw InvalidUsageError(
        fmt::format("DCOMM_TUNING_FILE '{}': alpha, beta, gamma and the intra-node alpha and beta must be >= 0", path));
  }
  return p;
}

std::string tuning_json(const CostParams& p) {
  nlohmann::json j = {{"alpha_s", p.alpha},
                      {"beta_s_per_byte", p.beta},
                      {"gamma_s_per_byte", p.gamma},
                      {"alpha_intra_s", p.alpha_intra},
                      {"beta_intra_s_per_byte", p.beta_intra}};
  return j.dump(2);
}

}  // namespace dcomm::coll
