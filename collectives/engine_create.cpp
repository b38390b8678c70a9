// Engine::create (engine.hpp): the group's checks, pieces and windows, its cost model, rules and slots, and the
// EngineImpl (engine_impl.hpp) that runs its calls, tuned as the environment says.

#include "collectives/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <dcomm/error.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/engine_impl.hpp"
#include "collectives/rules.hpp"
#include "collectives/selector.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slots.hpp"
#include "collectives/topology.hpp"
#include "collectives/tuner.hpp"
#include "collectives/window_probe.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kDefaultChunkBytes = 512 * 1024;

// Collective: the group's shared-memory slots, or null (slots.hpp).
std::shared_ptr<SlotChannel> make_slots(const GroupView& view, std::size_t chunk_bytes) {
  if (view.size < 2) return nullptr;
  Args none;
  none.coll = Collective::kBarrier;
  Deadline deadline = Deadline::after(std::chrono::seconds(60));
  const std::string what = fmt::format("collectives engine slots rank {}/{}", view.rank, view.size);
  // The probe's call number (probe.cpp) with steps above the probe's own.
  Context c(none, view, deadline, 0xFFFFF, what, chunk_bytes);
  return SlotChannel::create(c, 64);
}

}  // namespace

std::unique_ptr<Engine> Engine::create(const GroupView& group, const EngineOptions& opts) {
  GroupView view = group;
  if (view.size < 1 || view.rank < 0 || view.rank >= view.size || (view.size > 1 && !view.mesh) ||
      (!view.world_ranks.empty() && view.world_ranks.size() != static_cast<std::size_t>(view.size))) {
    throw InvalidUsageError(
        fmt::format("collectives engine: invalid group view (rank {}, size {}, {} world ranks, "
                    "mesh {})",
                    view.rank, view.size, view.world_ranks.size(), view.mesh ? "set" : "missing"));
  }
  if (view.hierarchy && view.hierarchy->topo.node_of.size() != static_cast<std::size_t>(view.size)) {
    throw InvalidUsageError(fmt::format("collectives engine: a topology of {} ranks for a group of {}",
                                        view.hierarchy->topo.node_of.size(), view.size));
  }
  long long chunk = opts.chunk_bytes > 0
                        ? static_cast<long long>(opts.chunk_bytes)
                        : env::get_int("DCOMM_CHUNK_BYTES", static_cast<long long>(kDefaultChunkBytes));
  if (chunk <= 0) throw InvalidUsageError(fmt::format("DCOMM_CHUNK_BYTES={} must be positive", chunk));
  const long long device_chunk =
      opts.device_chunk_bytes > 0
          ? static_cast<long long>(opts.device_chunk_bytes)
          : env::get_int("DCOMM_DEVICE_CHUNK_BYTES", static_cast<long long>(kDefaultDeviceChunkBytes));
  if (device_chunk <= 0) {
    throw InvalidUsageError(fmt::format("DCOMM_DEVICE_CHUNK_BYTES={} must be positive", device_chunk));
  }
  if (!view.hierarchy) view.hierarchy = build_hierarchy(view);  // local: every rank reads the same host ids
  // How the shared-memory rows fill their windows (collectives/window_probe.hpp); plain stores are not measured
  // where ranks share cores.
  std::string windows;
  bool reprobe = false;
  if (view.size > 1 && group_on_one_host(view)) {
    auto measured = std::make_shared<Hierarchy>(*view.hierarchy);
    const bool measure = !view.hierarchy->topo.shares_cores;
    const WindowProbe probe = probe_cached_windows(view, measure, &windows, Deadline::after(std::chrono::seconds(60)));
    measured->topo.cached_windows = probe.cached;
    measured->topo.cached_small_windows = probe.cached_small;
    measured->topo.window_streamed_seconds = probe.streamed_seconds;
    measured->topo.window_plain_seconds = probe.plain_seconds;
    measured->topo.window_small_seconds_per_byte = probe.small_seconds_per_byte;
    reprobe = measure && !probe.forced;
    view.hierarchy = std::move(measured);
    DCOMM_DEBUG("collectives engine rank {}/{}: shared-memory windows: {}", view.rank, view.size, windows);
  }
  bool check = opts.check_calls && env::get_bool("DCOMM_CHECK_CALLS", true);
  auto forced = parse_algorithm_spec(env::get("DCOMM_ALGO").value_or(""));
  const std::string rules_path = env::get("DCOMM_RULES_FILE").value_or("");
  std::vector<Rule> rules = rules_path.empty() ? std::vector<Rule>{} : load_rules(rules_path);
  std::string source;
  CostParams params = fit_cost_model(view, static_cast<std::size_t>(chunk), &source);
  if (!windows.empty()) source += "; shared-memory windows: " + windows;
  params.check_calls = check;
  params.device_chunk_bytes = static_cast<double>(device_chunk);
  GroupView with_slots = view;
  with_slots.slots = make_slots(view, static_cast<std::size_t>(chunk));
  auto engine = std::make_unique<EngineImpl>(std::move(with_slots), static_cast<std::size_t>(chunk),
                                             static_cast<std::size_t>(device_chunk), check, params, std::move(source),
                                             std::move(forced), std::move(rules), rules_path);
  // Measured choices (tuner.hpp; with the call check on: a measurement starts at a call every rank compared), by
  // default where the model is known off: ranks sharing cores, one-node groups under non-temporal window stores
  // or whose lines cross cores slowly (window_rule_set).
  const TuneMode tune = tune_mode_from_env();
  const bool shared = view.hierarchy->topo.shares_cores;
  if (check && view.size > 1 && (tune == TuneMode::kOn || (tune == TuneMode::kAuto && shared))) {
    engine->tune(env::get("DCOMM_TUNE_OUT").value_or(""));
  } else if (check && view.size > 1 && tune == TuneMode::kAuto && group_on_one_host(view)) {
    engine->tune_by_windows(env::get("DCOMM_TUNE_OUT").value_or(""));
  }
  // Only with the call check on: without it the ranks' calls may differ, and so may their counts.
  if (reprobe && check) engine->measure_windows_again(static_cast<uint64_t>(
      std::max<long long>(1, env::get_int("DCOMM_SHM_REPROBE_CALLS", static_cast<long long>(kReprobeCalls)))));
  return engine;
}

}  // namespace dcomm::coll