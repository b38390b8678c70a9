#pragma once
// The Engine (engine.hpp) inside: the EngineImpl class, its state and its per-call path - run() and, for a repeat
// of the last call's shape, run_direct() and run_algorithm() - inline here, so that run() keeps them in its body
// wherever it is compiled. The full path of a call: engine.cpp; the tuner's measurement and the window stores
// measured again: engine_tuning.cpp; Engine::create: engine_create.cpp. Internal to the engine.

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <dcomm/error.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/call_check.hpp"
#include "collectives/call_shape.hpp"
#include "collectives/context.hpp"
#include "collectives/engine.hpp"
#include "collectives/reducing_call.hpp"
#include "collectives/selector.hpp"
#include "collectives/slots.hpp"
#include "collectives/topology.hpp"
#include "collectives/tuner.hpp"
#include "collectives/window_probe.hpp"

namespace dcomm::coll {

class EngineImpl final : public Engine {
 public:
  EngineImpl(GroupView view, std::size_t chunk_bytes, std::size_t device_chunk_bytes, bool check_calls,
             CostParams params, std::string source, std::map<Collective, std::string> env_forced,
             std::vector<Rule> rules, std::string rules_path)
      : view_(std::move(view)),
        chunk_bytes_(chunk_bytes),
        device_chunk_bytes_(device_chunk_bytes),
        check_calls_(check_calls),
        selector_(params, std::move(source), std::move(env_forced), std::move(rules), std::move(rules_path)),
        window_set_(window_rule_set(view_.hierarchy->topo)) {}

  /// Measure the choices of calls the cost model would make (tuner.hpp), from the next call on; rank 0 saves what
  /// the group learns to `out` when not empty (DCOMM_TUNE_OUT).
  void tune(std::string out) {
    tune_ = true;
    tune_out_ = std::move(out);
  }
  /// DCOMM_TUNE=auto on a one-node group with cores of its own: measure while the windows take non-temporal stores,
  /// into a set of learned rules of their own; the model chooses under plain ones. `out` as for tune().
  void tune_by_windows(std::string out) {
    tune_by_windows_ = true;
    tune_out_ = std::move(out);
  }
  ~EngineImpl() override;

  /// From now on, measure how the windows are best filled again every `calls` calls or kReprobeBytes.
  void measure_windows_again(uint64_t calls) { reprobe_calls_ = calls; }

  void run(const Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
           std::string_view found) override {
    // A repeat whose exchange is planned through the slots, with no memory to take first, goes the direct way -
    // when nothing is to be done before it (a measurement due, the rules to change: run_full() does those).
    if (repeat_.direct && !probe_due_ && !rules_change() && found.empty() && algorithm.empty() &&
        repeat_.shape.matches(args) && repeat_.generation == selector_.generation()) {
      return run_direct(args, deadline, seq);
    }
    run_full(args, algorithm, deadline, seq, found);
  }

  void set_algorithm(Collective c, const std::string& name) override { selector_.set_override(c, name); }

  std::string explain(Collective c, std::size_t bytes, Device device) const override {
    GroupView view;
    {
      std::lock_guard<std::mutex> lock(view_mutex_);  // run() may be replacing its topology on another thread
      view = view_;
    }
    return selector_.explain(c, bytes, view, device);
  }

 private:
  // Host calls at least this large make sure, before the check, that scratch of their size can be had at all.
  static constexpr std::size_t kProbeScratchBytes = std::size_t{256} << 20;
  // How long the group's destruction waits for the other ranks' part of its last call, when this rank returned from
  // it before seeing them (slots.hpp: the pending check).
  static constexpr auto kSettleTimeout = std::chrono::seconds(5);
  // Calls of at least this much (the model's n) count toward measuring the window stores again (count_for_probe).
  static constexpr double kReprobeFromBytes = double(std::size_t{1} << 20);

  // The windows' state (changed at the same call on every rank) picks the rules: measured under non-temporal
  // stores or slow lines, the model's under fast plain ones; a set per state (docs/algorithms.md, tuner.hpp).
  bool rules_change() const { return tune_by_windows_ && !measuring_ && window_set_ != rule_set_; }

  // run() for any call (engine.cpp).
  [[gnu::noinline]] void run_full(const Args& args, const std::string& algorithm, const Deadline& deadline,
                                  uint64_t seq, std::string_view found);

  // run() for a repeat of a shape whose algorithm exchanges through the slots with a plan (repeat_.direct): the
  // exchange carries the call check, and there is no work buffer or memory probe to take first - what run()'s
  // general path would do for it, without its tests (an 8 B rooted call in a loop: docs/benchmark.md, session 25).
  void run_direct(const Args& args, const Deadline& deadline, uint64_t seq) {
    const Algorithm& algo = *repeat_.algo;
    if (args.chosen_algorithm != nullptr) args.chosen_algorithm->store(algo.name, std::memory_order_relaxed);
    Context ctx(args, view_, deadline, seq, repeat_.mine->what, repeat_.chunk);
    ctx.state = &repeat_.mine->state;
    ctx.slot_plan = &repeat_.slot_plan;
    if (repeat_.slot_plan.checked) ctx.call = &repeat_.call;
    if (reprobe_calls_ > 0) ctx.windows = &watch_;
    run_algorithm(ctx, algo, nullptr);
  }

  // The algorithm of a call whose check is done or rides in its first exchange, and what follows a call that
  // succeeded. `scratch`: a reducing call's work buffer, or null (its output is the work buffer).
  void run_algorithm(Context& ctx, const Algorithm& algo, char* scratch) {
    try {
      if (repeat_.reducing) {
        run_reducing(ctx, algo, scratch);
      } else {
        algo.run(ctx);
      }
    } catch (const std::bad_alloc&) {
      // Memory an algorithm grows on its way (a vector, a staging list) ran out after the check: this rank fails
      // alone, and its peers' waits for it end by the deadline.
      throw SystemError(fmt::format("{}: out of memory in call #{} of this group ({} on this rank)", ctx.what,
                                    ctx.seq, format_bytes(largest_bytes(ctx.args))),
                        ENOMEM);
    }
    if (reprobe_calls_ > 0 && !measuring_) count_for_probe();
    if (watch_.judged) slow_calls_ = watch_.slow ? slow_calls_ + 1 : 0;
    watch_ = {};
  }

  // A call that is not a repeat: validated, chosen for, and remembered as repeat_ (engine.cpp).
  void learn(const Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
             std::string_view found, const CallShape& shape, uint64_t generation);

  // The tuner's measurement at the first call of a size class; whether it checked the call (engine_tuning.cpp).
  bool measure_first(const Args& args, const Deadline& deadline, uint64_t seq);

  // Runs `body` with the calls of a measurement (numbered from kTuneSeqBase, neither measured nor counted while
  // measuring_); a failure in them is raised again with "<op> rank r/p (call #seq of this group): while <during>
  // (DCOMM_TUNE; off turns it off): " before its message, its type kept (engine_tuning.cpp).
  void measuring(const Args& args, uint64_t seq, const Deadline& deadline, std::string_view during,
                 const std::function<void(const TuneCall&)>& body);

  // The loop trial of the call's class (tuner.hpp, LoopTrial), or null: none, or not while measuring.
  using TrialKey = std::tuple<Collective, int, int>;  // (collective, class, learned set), as tuned_classes_
  LoopTrial* trial_for(const Args& args) {
    if (trials_.empty() || measuring_) return nullptr;
    auto it = trials_.find({args.coll, tune_class(args, view_.size), rule_set_});
    return it == trials_.end() ? nullptr : &it->second;
  }
  // A call of a class on trial: which row runs it, by the trial's count (every rank counts alike); after learn()
  // chose its algorithm, turned into the runner-up where the trial says so (engine_tuning.cpp). -1: untimed.
  int trial_row(LoopTrial* trial, const Args& args, const Deadline& deadline, uint64_t seq);
  // At the first call of a class the cost model chooses for (a one-node group under DCOMM_TUNE=auto, no name or
  // rule deciding it): a trial of its choice against the model's runner-up, where priced within
  // LoopTrial::kModelWithin (engine_tuning.cpp).
  void start_model_trial(const Args& args);
  // After the trial's last call: the group agrees on the rows' paces and keeps the faster (engine_tuning.cpp).
  void finish_trial(const Args& args, LoopTrial& trial, const Deadline& deadline, uint64_t seq);

  // The pipelining unit: a device message costs ~50 host ones (kDefaultDeviceChunkBytes). The call check compares
  // device_pieces() (CallDescriptor::device), so every rank of a call cuts it alike.
  std::size_t chunk_for(const Args& args) const { return device_pieces(args) ? device_chunk_bytes_ : chunk_bytes_; }

  // A call this rank cannot run: refused through the call check, or alone (engine.cpp).
  [[noreturn]] void refuse(const Args& args, const Deadline& deadline, uint64_t seq, const std::string& problem) const;

  // After a call that succeeded: every rank counts the large calls it made (at least kReprobeFromBytes of the
  // model's n, which every rank computes alike, not a v-variant) and their bytes; when they reach kReprobeBytes or
  // reprobe_calls_, every rank measures the window stores again, before the next call. Only large calls count:
  // their check has compared every rank's call before they moved data (the call check is synchronous for them;
  // only small rooted calls run ahead through the slots), so a call that succeeded here succeeded alike
  // everywhere, and the counts never drift apart (counting every call, a rank whose call was invalid counted other
  // bytes than the others and waited in a probe of its own). A changed answer changes the topology the model
  // prices and shm_direct's rounds follow, and the choices are made again.
  void count_for_probe() {
    const double n = repeat_.probe_bytes;
    if (n == 0) return;
    ++calls_since_probe_;
    bytes_since_probe_ += n;
    if (bytes_since_probe_ < kReprobeBytes && calls_since_probe_ < reprobe_calls_) return;
    probe_due_ = true;
  }

  // The window stores measured again, every rank at the same point of the same call (engine_tuning.cpp).
  void probe_again(const Deadline& deadline, const std::string& during);

  // The largest buffer of a call, for error messages.
  static std::size_t largest_bytes(const Args& a) { return std::max(a.send.bytes(), a.recv.bytes()); }

  // What the engine keeps per algorithm of the table: its state on this group and the name its errors start with.
  struct PerAlgorithm {
    std::unique_ptr<AlgorithmState> state;
    std::string what;  // "all_reduce[ring] rank 2/4", built on the algorithm's first call
  };

  // The last valid call's shape and what the engine derived from it (CallShape: what validation, the choice and
  // the descriptor read of a call). algo null: none yet (or the last call was refused).
  struct Repeat {
    CallShape shape;
    uint64_t generation = 0;  ///< the selector's overrides when it was chosen
    const Algorithm* algo = nullptr;
    PerAlgorithm* mine = nullptr;
    CallDescriptor call;
    bool fused = false;  ///< the algorithm's first exchange carries the check
    std::size_t chunk = 0;  ///< chunk_for(): the shape's devices decide it
    double probe_bytes = 0;  ///< the model's n when the call counts toward the next window measurement, else 0
    // What else the run derives from the shape: it moves nothing (barrier), it reduces, it combines in scratch
    // (needs_work_scratch), its largest buffer is probed for memory (a host call of kProbeScratchBytes or more).
    bool nothing = false, reducing = false, work_scratch = false, probe_memory = false;
    bool planned = false;  ///< slot_plan holds the slot row's exchange for this shape
    bool direct = false;   ///< a repeat runs by run_direct()
    /// No shape is a repeat (a call was refused, or failed the check before the tuner's measurement).
    void forget() {
      algo = nullptr;
      direct = false;
    }
    SlotPlan slot_plan;
  };

  GroupView view_;
  mutable std::mutex view_mutex_;  ///< explain()'s copy of view_ against count_for_probe()'s replacement
  /// The window probe's window and buffers (ranks 0 and 1), made at the first measurement again and kept for the
  /// next: a group that never measures again (most subgroups: only large calls count) holds none.
  std::unique_ptr<ProbeRig> probe_rig_;
  uint64_t reprobe_calls_ = 0;     ///< 0: the window stores are not measured again (forced, or cores shared)
  uint64_t calls_since_probe_ = 0;
  bool probe_due_ = false;  ///< measure again before the next call
  WindowsWatch watch_;     ///< what this call found of its windows (Context::windows)
  int slow_calls_ = 0;     ///< this rank's calls in a row whose windows were slow: told the group at a check
  double bytes_since_probe_ = 0;
  std::size_t chunk_bytes_;
  std::size_t device_chunk_bytes_;
  bool check_calls_;
  Selector selector_;
  // The tuner (tuner.hpp): whether it measures, the classes measured, whether run() is inside a measurement, and its
  // calls' numbers: kTuneSeqBase and up (a tag keeps 20 bits of a call number; the model's probe has 0xFFFFF).
  static constexpr uint64_t kTuneSeqBase = 0xC0000;
  static constexpr uint64_t kTuneSeqMask = 0x1FFFF;
  bool tune_ = false;
  bool tune_by_windows_ = false;  ///< tune_by_windows(): tune_ follows the windows (window_rule_set)
  int rule_set_ = kDefaultRuleSet;  ///< the learned-rule set in use (tuner.hpp)
  int window_set_ = kDefaultRuleSet;  ///< window_rule_set() of the topology: set with it (constructor, probe_again)
  std::string tune_out_;
  bool measuring_ = false;
  uint64_t tune_calls_ = 0;
  std::set<std::tuple<Collective, int, int>> tuned_classes_;  ///< (collective, class, learned set)
  std::map<TrialKey, LoopTrial> trials_;  ///< the classes whose choice is still to be tried on the program's calls
  std::set<TrialKey> model_tried_;        ///< the classes start_model_trial() has seen
  std::vector<PerAlgorithm> per_algorithm_{algorithm_table().size()};
  Repeat repeat_;
};

}  // namespace dcomm::coll
