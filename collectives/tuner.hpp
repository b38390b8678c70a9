#pragma once
// Choices measured online (DCOMM_TUNE): the first call of a collective in a size class (a power of two of the
// model's n) runs every algorithm that handles it a few times on scratch buffers, the ranks agree on the slowest
// rank's median time of each, and the fastest becomes a learned rule of the group (Selector::add_learned) for the
// whole class. Where the cost model's prices do not hold - ranks sharing cores, where measured rows ran 0.5-8x
// their price (docs/benchmark.md, session 11) - the group measures what a rules file (collectives/rules.hpp) would
// have told it, without the file. Like a rules file, it never changes a result: only which algorithm computes it.
//
// Every rank measures at the same call: the class is a function of the call, which the call check has compared on
// every rank before any rank measures (the engine checks the call first), and of the calls before it. The
// measurements' own calls are ordinary calls of the group (with the call check), numbered apart from the caller's.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <dcomm/error.hpp>

#include "collectives/engine.hpp"
#include "collectives/rules.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

struct Algorithm;

enum class TuneMode {
  kOff,
  kOn,    ///< every group of two ranks or more, with the call check on
  /// The default: groups whose ranks share cores (Topology::shares_cores) and one-node groups whose windows take
  /// non-temporal stores (Topology::cached_windows false) or cross cores slowly (windows_cross_slowly), where the
  /// model is known off (docs/algorithms.md).
  kAuto,
};

/// DCOMM_TUNE: "off", "on" or "auto" (unset: auto). Throws InvalidUsageError naming the variable otherwise.
TuneMode tune_mode_from_env();

/// Calls measured: the model's n from 4 KiB (below, a call is a few microseconds of latency the model prices well)
/// to 64 MiB (scratch of the call's size, a few calls of each algorithm).
inline constexpr double kTuneMinBytes = 4096;
inline constexpr double kTuneMaxBytes = double(std::size_t{64} << 20);
/// A one-node group measuring for its non-temporal windows (TuneMode::kAuto) measures calls below this: the
/// model's choices ran 1.3-3x the fastest row's time from 16 KiB to 4 MiB there and about as fast from 16 MiB
/// (session 16), where a measurement costs 0.2-0.6 s (a 64 MiB all_reduce on 2 ranks: 586 ms) and lands inside a
/// program's loop when the windows' stores change while it runs.
inline constexpr double kTuneWindowsMaxBytes = double(std::size_t{8} << 20);
/// The same where plain-store windows cross cores slowly (windows_cross_slowly): there the model's choices at 16
/// MiB took 1.1-1.4x OpenMPI's time (broadcast[shm_direct] 1.86-2.09 ms, binomial measured 0.82-0.89; all_to_all
/// [shm_rounds] 1.94-2.05 against 1.44-1.51 measured; session 19, 2 ranks bound), and measured 0.54-1.09x; a
/// measurement of all_reduce's 16 MiB class took 0.33 s there, its 64 MiB class's 1.2 s for 0.4-0.6x gains at
/// most, so up to 32 MiB: for the rooted collectives. The others (every rank sends and receives) are measured at
/// every size (window_tune_max_bytes): at 32-64 MiB the model's cma took 1.26-1.33x the measured row's time for
/// all_reduce and all_gather (session 30, 2 ranks bound: all_reduce 64 MiB 19.1 ms against shm_direct's 14.5; the
/// measurement of the 64 MiB class took 0.5 s, its slower rows left out after one call).
inline constexpr double kTuneSlowLinesMaxBytes = double(std::size_t{32} << 20);
/// Under non-temporal stores, the collectives in which every rank sends and receives (all_reduce, all_gather,
/// reduce_scatter, all_to_all) are measured below 32 MiB too: at 16 MiB the model took all_gather[cma] at 0.92-1.20x
/// OpenMPI's time where the measured row ran 0.63-0.98x (session 22, 2 ranks bound, DCOMM_SHM_CACHED=0, old and new
/// alternating, 6 runs each; all_to_all and reduce_scatter moved within the noise of those runs, +-0.2 between runs
/// of one choice; all_reduce kept its choice). Not the rooted ones: a measurement times a row's 3 calls apart, and
/// a pipelined window row's root runs ahead into its next call in a loop - measured, broadcast at 16 MiB took
/// 0.50-0.56x against the model's 0.27-0.49, scatter 0.74-0.89 against 0.56-0.70 (3 runs each).
inline constexpr double kTuneNonTemporalMaxBytes = kTuneSlowLinesMaxBytes;

/// The learned-rule sets of a one-node group measuring by its windows (Selector::use_learned; Engine's
/// tune_by_windows): the model's where plain stores cross cores fast, one measured under non-temporal stores, one
/// where plain stores cross slowly (windows_cross_slowly); each measured in its own state only.
inline constexpr int kDefaultRuleSet = 0;
inline constexpr int kNonTemporalRuleSet = 1;
inline constexpr int kSlowLinesRuleSet = 2;
/// The set for the windows' state in `t` (its cached_windows and window_small_seconds_per_byte).
int window_rule_set(const Topology& t);
/// The model's n from which a group measuring into `set` leaves calls of collective `c` to the model.
double window_tune_max_bytes(int set, Collective c);

/// The size class a call is measured in (floor of log2 of the model's n), or -1 for a call the tuner leaves to the
/// other choices: on device buffers, a v-variant, premul_sum, or n outside [kTuneMinBytes, kTuneMaxBytes].
int tune_class(const Args& args, int group_size);

/// The end (exclusive, in the model's bytes) of the rule learned for size class `cls`: the next power of two, except
/// for the largest class measured (kTuneMaxBytes), which speaks for every larger call too (UINT64_MAX: none is
/// measured), where every row streams from memory as it does there. Session 30, 2 ranks bound: the 64 MiB class
/// chose all_reduce[shm_direct] (14.5 ms against the model's cma, 19.1), and at 128 MiB shm_direct took 28.6 ms
/// against cma's 36.5.
uint64_t tuned_class_end(int cls);
/// The learned rule of size class `cls` of `c` on `ranks` ranks: `algorithm` from 2^cls to tuned_class_end(cls).
Rule class_rule(Collective c, int ranks, int cls, std::string algorithm);

/// Rows measured within this fraction of the fastest count as tied with it (pick_measured), and the model's choice
/// stays while within it.
inline constexpr double kTieMargin = 0.10;
/// The same where the group's ranks share cores (measure_algorithms): there the model prices on built-in
/// parameters and no window probe, and the measurement understates the rows' differences (see tuner.cpp).
inline constexpr double kSharedCoresTieMargin = 0.02;

/// Runs one call of the group (the engine's run() with its own call number) with `algorithm` ("" for the choice
/// the group would make), blocking.
using TuneCall = std::function<void(const Args& args, const std::string& algorithm)>;

struct TuneResult {
  std::string algorithm;  ///< empty: nothing measured (fewer than two candidates, or scratch not had everywhere)
  std::string how;        ///< the times, for explain() and the log
  std::string runner_up;  ///< the fastest other row, where within LoopTrial::kWithin of the choice; else empty
};

/// The measured choice of a class tried again on the program's own calls, against the runner-up. The tuner
/// measures on buffers of its own, written once, at a class's first call; a program's calls find their inputs just
/// written, still in the writing core's cache, and there the rows rank otherwise: 2 ranks bound, all_reduce of 64
/// KiB took 6.0 us a call by cma and 7.9 by shm_direct with inputs written once, 11.7 and 9.4 with each call's
/// input written just before it (dcomm-bench --fresh); reduce 5.4 / 9.2 against 9.7 / 6.9 (session 32). So after
/// kStartAfter calls of the class, kBlocks blocks of kBlock calls alternate the two rows, each block timed from the
/// end of its first call (a loop's pace; the first pays for the switch); every rank takes each row's better block,
/// the group agrees on the slowest rank's (an all_reduce), and the runner-up replaces the choice if it ran faster
/// by more than kTieMargin - also where cores are shared, unlike the tuner's own pick: the trial times the program's
/// loop itself, and there each call also waits for its ranks' turns on the cores. 3 ranks on 2 cores, all_reduce
/// with --fresh: trials at 2% switched 256 KiB on 343 against 328 us a call and 1 MiB on 1.47 against 1.34 ms, where
/// the benchmark then ran 0.61 and 0.54 of OpenMPI's time against 0.58 and 0.49 before (session 32). Once per
/// class: the trial costs kBlocks/2·(kBlock) calls of the slower row.
/// Pure: the engine runs the calls, times them and agrees (engine_tuning.cpp).
class LoopTrial {
 public:
  static constexpr uint64_t kStartAfter = 64;
  static constexpr int kBlock = 8;
  static constexpr int kBlocks = 4;
  /// A runner-up measured slower than this many times the choice is not tried.
  static constexpr double kWithin = 2.0;
  /// Nor one the cost model prices above this many times its choice (a trial of the model's choice): the model's
  /// prices are further off than a measurement. 2 ranks bound, windows crossing fast (DCOMM_SHM_WINDOW_PRICE=0.03),
  /// all_reduce of 64 KiB: shm_direct priced 3.8 us and cma 9.7, measured 8.3 and 5.9 a call in a loop (session 32).
  static constexpr double kModelWithin = 4.0;

  /// `measured`: the tuner's description of its measurement (TuneResult::how), which describe() goes on from.
  /// `of_model`: the choice is the cost model's, not a measurement's (EngineImpl::start_model_trial).
  LoopTrial(std::string chosen, std::string runner_up, double margin, std::string measured = "", bool of_model = false)
      : names_{std::move(chosen), std::move(runner_up)}, margin_(margin), measured_(std::move(measured)),
        of_model_(of_model) {}
  bool of_model() const { return of_model_; }
  /// The row of the class's next call (0: the choice, 1: the runner-up), counting it; -1 outside the trial. The
  /// first is the class's call 1: call 0 is the one the tuner measured before.
  int next_row();
  /// The call next_row() answered `row` for took `seconds` (from before its check to its end).
  void record(int row, double seconds);
  /// Every block has run: the group agrees on paces() now.
  bool due() const { return calls_ >= kStartAfter + kBlock * kBlocks; }
  /// Each row's better block's time a call, this rank's (infinity for a row with no block).
  std::vector<double> paces() const;
  /// From the agreed paces: the row to keep, the runner-up only where faster by more than the margin.
  int keep(const std::vector<double>& agreed) const;
  const std::string& name(int row) const { return names_[row]; }
  /// For explain() and the log: the measurement, then the trial's agreed paces and what was kept.
  std::string describe(const std::vector<double>& agreed, int keep) const;

 private:
  std::string names_[2];
  double margin_;
  std::string measured_;
  bool of_model_ = false;
  uint64_t calls_ = 1;  ///< the class's calls counted: the one the tuner measured at is its first (call 0)
  double block_seconds_ = 0;  ///< the current block's calls after its first
  double best_[2] = {-1, -1};  ///< each row's best block pace so far; negative: none
};

/// Measures every algorithm that handles `call` on `view` (not by-name-only rows) through `run`, on scratch
/// buffers of the call's shape, and picks (pick_measured) with `model` as the cost model's choice.
TuneResult measure_algorithms(const Args& call, const GroupView& view, const Algorithm& model, uint64_t seq,
                              const TuneCall& run);

/// Adds `learned` to the rules file at `path` (DCOMM_TUNE_OUT; DCOMM_RULES_FILE's format), replacing a rule there
/// of the same collective, group size, range and memory kind, so that a later run can take them from the file
/// instead of measuring. Written whole to a temporary file and renamed; serialised within the process. A file
/// that cannot be read or written is logged (a warning), never fails the call.
void save_learned(const std::string& path, const std::vector<Rule>& learned);

/// Throws `e` again, of its own type, with `prefix` before its message (a measurement's failure names the
/// caller's call, not the measurement's own call number); a type it does not know is rethrown as it is.
[[noreturn]] void rethrow_prefixed(const Error& e, const std::string& prefix);


/// The index of the fastest of `seconds` (rows in table order), except that the model's choice `model` stays while
/// it is within `margin` of the fastest, and among rows within `margin` of the fastest the first in the table
/// wins: choices stable run to run where two rows are about as fast.
std::size_t pick_measured(const std::vector<double>& seconds, std::size_t model, double margin = kTieMargin);

}  // namespace dcomm::coll
