#pragma once
// The one table of algorithms. Every algorithm is a file under collectives/algorithms/ that ends with its own row
// (a Registration); the engine, the tests and dcomm-bench enumerate this table, so a new file is selected, tested
// and benchmarked with no other edit than its name in collectives/algorithms/meson.build
// (docs/adding-an-algorithm.md).

#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/engine.hpp"

namespace dcomm::coll {

/// The largest call (the cost model's n) whose window stores follow the group's probe at 64 KiB
/// (collectives/window_probe.hpp: WindowProbe::cached_small); larger ones follow its answer at 1 MiB.
inline constexpr std::size_t kShmSmallCachedBytes = std::size_t{256} << 10;

/// The α–β–γ model's parameters (seconds per message, per byte moved, per byte reduced) and the pipelining
/// chunk the algorithms cut messages into.
/// α and β are the group's slowest link, the one the flat algorithms are priced with (on a group that spans nodes,
/// the link between nodes); α_intra, β_intra are the link between two ranks of one node (shared memory), which the
/// hierarchical algorithms price their node-local phases with. `nodes` and `local` describe the group being
/// priced (its node count and the ranks on its fullest node; predict() fills them in).
struct CostParams {
  double alpha = 5e-6;
  double beta = 1e-10;
  double gamma = 5e-11;
  double alpha_intra = 5e-6;
  double beta_intra = 1e-10;
  double chunk_bytes = 512.0 * 1024;
  /// The pipelining unit of calls on device buffers (EngineOptions::device_chunk_bytes); predict() prices such
  /// calls with it and with the device's α, β, γ (device_priced).
  double device_chunk_bytes = 8.0 * 1024 * 1024;
  int nodes = 1;
  int local = 1;
  int min_local = 1;  ///< ranks on the emptiest node: a node with fewer serves several rails
  /// Some ranks share cores (Topology::shares_cores): a reader then often runs on the core that wrote the data.
  bool shared_cores = false;
  /// Plain stores into shared-memory windows reach other cores fast (Topology::cached_windows): the windows'
  /// copies then run at cache speed instead of memory speed.
  bool cached_windows = false;
  /// The same for calls of model size up to kShmSmallCachedBytes (Topology::cached_small_windows).
  bool cached_small_windows = false;
  /// Whether a call of model size n fills the windows with plain stores (collectives/window_probe.hpp,
  /// cached_windows(Context), which the algorithms follow): never where ranks share cores.
  bool plain_windows(double n) const {
    return !shared_cores && (cached_windows || (cached_small_windows && n <= double(kShmSmallCachedBytes)));
  }
  /// With plain window stores: the price of a byte read from a window in a small round, up to kShmStreamingReadBytes
  /// of a call's reads (the group's probe: Topology::window_small_seconds_per_byte less the copies' γ, at least 0);
  /// negative where not measured, β then (small_window_read).
  double window_read_beta = -1;
  double small_window_read() const { return window_read_beta >= 0 ? window_read_beta : beta; }
  /// Without plain stores: the price of a byte read from a window that non-temporal stores filled (the group's
  /// probe: its 1 MiB pattern's time with them, Topology::window_streamed_seconds, per byte copied in and out, on a
  /// grid of half powers of two, less γ, at least 0); negative where not measured (ranks sharing cores).
  double window_streamed_beta = -1;
  /// With plain stores: the price of a byte read from a window past the first kShmStreamingReadBytes of a call's
  /// reads, where the lines stream (the group's probe: its 1 MiB pattern's time with plain stores,
  /// Topology::window_plain_seconds, per byte copied in and out, on the same grid, less γ, at least 0); negative
  /// where not measured (0 then: such reads priced with the copies around them).
  double window_plain_beta = -1;
  double streaming_window_read() const { return window_plain_beta >= 0 ? window_plain_beta : 0.0; }
  /// Whether the engine checks calls: algorithms that do not fuse the check pay its ⌈log₂P⌉ rounds on top.
  bool check_calls = false;
};

struct Algorithm {
  Collective collective;
  const char* name;
  const char* description;
  /// Whether it handles this call on this group (a v-variant, a world size); every rank answers alike.
  bool (*supports)(const Args& args, const GroupView& view);
  void (*run)(Context& ctx);
  /// Predicted seconds for `bytes` (the collective's n, see docs/algorithms.md) on `size` ranks.
  double (*cost)(const CostParams& params, double bytes, int size);
  /// Whether run() carries out the call check itself, on its first exchange (Context::call); the engine then
  /// sends no separate check, and the cost model charges the others for it.
  bool fuses_check = false;
  /// Whether only a name (set_algorithm, DCOMM_ALGO, dcomm-bench --algo) selects it: the cost model still prices
  /// it for explain(), but never picks it, because measurements did not show it winning anywhere.
  bool by_name_only = false;
  /// Reductions only: run() reads this rank's input from Context::input, which the engine points at args.send
  /// instead of copying it into `work` first (one pass over memory less); premul_sum still copies. reduce_scatter:
  /// run() leaves this rank's block of the result at its block of `work`, which the engine copies to the output,
  /// or writes it into args.recv itself and says so (Context::wrote_output).
  bool takes_input = false;
  /// Whether run() moves its data through the group's shared-memory slots (collectives/slots.hpp), with the call
  /// check in the same exchange (it fuses the check). Where a group has slots, the check of every other
  /// algorithm is a slot exchange too, so that any two ranks' calls meet in the same exchange.
  bool uses_slots = false;
};

/// Adds one algorithm's row to the table. Each algorithm file ends with one, after its functions:
///   namespace { const Registration kRow{{Collective::kAllGather, "bruck", "...", supports_any,
///                                        run_all_gather_bruck, cost_all_gather_bruck, true}}; }
/// Rows are added before main() in link order, the order of collectives/algorithms/meson.build; among one
/// collective's rows that order breaks the cost model's ties (the earlier row wins).
struct Registration {
  explicit Registration(const Algorithm& row);
};

/// Every registered row, grouped by collective (in the order of the Collective enum).
const std::vector<Algorithm>& algorithm_table();
/// The rows for one collective, in table order (built once: selection runs on every call).
const std::vector<const Algorithm*>& algorithms_for(Collective c);
/// The row's place in algorithm_table(), for per-algorithm arrays.
std::size_t algorithm_index(const Algorithm& a);
/// The row named `name` for `c`, or null.
const Algorithm* find_algorithm(Collective c, const std::string& name);
/// "ring, tree, ..." for error messages.
std::string algorithm_names(Collective c);

}  // namespace dcomm::coll
