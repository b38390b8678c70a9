// The Engine: validate, select, check the call across ranks, prepare the reduction, run the algorithm.

#include "collectives/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <dcomm/error.hpp>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <tuple>
#include <utility>

#include "collectives/call_check.hpp"
#include "collectives/call_shape.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/reducing_call.hpp"
#include "collectives/selector.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slots.hpp"
#include "collectives/topology.hpp"
#include "collectives/tuner.hpp"
#include "collectives/validate.hpp"
#include "collectives/window_probe.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kDefaultChunkBytes = 512 * 1024;
// Host calls at least this large make sure, before the check, that scratch of their size can be had at all.
constexpr std::size_t kProbeScratchBytes = std::size_t{256} << 20;
// How long the group's destruction waits for the other ranks' part of its last call, when this rank returned from
// it before seeing them (slots.hpp: the pending check).
constexpr auto kSettleTimeout = std::chrono::seconds(5);
// Calls of at least this much (the model's n) count toward measuring the window stores again (count_for_probe).
constexpr double kReprobeFromBytes = double(std::size_t{1} << 20);

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
  ~EngineImpl() override {
    if (view_.slots) view_.slots->settle_quietly(view_, Deadline::after(kSettleTimeout));
  }

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
  // The windows' state (changed at the same call on every rank) picks the rules: measured under non-temporal
  // stores or slow lines, the model's under fast plain ones; a set per state (docs/algorithms.md, tuner.hpp).
  bool rules_change() const { return tune_by_windows_ && !measuring_ && window_set_ != rule_set_; }

  // run() for any call: out of line, so that run()'s direct way saves and restores few registers.
  [[gnu::noinline]] void run_full(const Args& args, const std::string& algorithm, const Deadline& deadline,
                                  uint64_t seq, std::string_view found) {
    if (probe_due_) probe_again(deadline, fmt::format("measuring again before {} call #{} of this group", to_string(args.coll), seq));
    if (rules_change()) {
      rule_set_ = window_set_;
      tune_ = rule_set_ != kDefaultRuleSet;
      selector_.use_learned(rule_set_);
    }
    // A call of the last valid call's shape (repeat_) takes what the engine derived from the shape alone; any other
    // call is validated and chosen for in full. Either way its descriptor goes through the call check below, so a
    // rank whose call differs from the others' is caught alike (the cache is this rank's, never the group's).
    const bool repeat = found.empty() && algorithm.empty() && repeat_.algo != nullptr && repeat_.shape.matches(args) &&
                        repeat_.generation == selector_.generation();
    // The first call of a size class the tuner measures: checked here, on every rank, before the measurement (a
    // repeat's class was measured, or left to a name, at the shape's first call).
    const bool checked = tune_ && !repeat && algorithm.empty() && found.empty() && measure_first(args, deadline, seq);
    if (!repeat) learn(args, algorithm, deadline, seq, found, CallShape::of(args), selector_.generation());
    const Algorithm* algo = repeat_.algo;
    if (args.chosen_algorithm != nullptr) args.chosen_algorithm->store(algo->name, std::memory_order_relaxed);
    PerAlgorithm& mine = *repeat_.mine;
    Context ctx(args, view_, deadline, seq, mine.what, repeat_.chunk);
    ctx.state = &mine.state;
    if (repeat_.planned) ctx.slot_plan = &repeat_.slot_plan;
    if (reprobe_calls_ > 0) ctx.windows = &watch_;
    // Memory is taken before the check, so that a rank that cannot have it tells every rank in the check instead
    // of failing alone in the middle of the algorithm: the work buffer of a reducing call, and for a large host
    // call a probe of its largest buffer's size (about what its algorithm's scratch takes; a count far beyond the
    // memory fails here). Small calls skip the probe: their scratch comes from the cache.
    Scratch held;
    if (!repeat_.nothing) {
      try {
        if (repeat_.work_scratch) held = ctx.scratch(args.send.count);
        if (held.data() == nullptr && repeat_.probe_memory) probe_host_memory(largest_bytes(args));
      } catch (const Error& e) {
        refuse(args, deadline, seq, e.what());
      }
    }
    const bool check = check_calls_ && view_.size > 1;
    const CallDescriptor& call = repeat_.call;
    if (checked) {
      // compared before the measurement; its algorithm is now the measured one, the same on every rank
    } else if (check && (!repeat_.fused || repeat_.nothing)) {
      // Through the slots the check carries this rank's note that its windows were slow (note_window_round), and
      // every rank reads every rank's: all measure again here, before moving any data, or none does.
      const bool notes = view_.slots != nullptr && reprobe_calls_ > 0;
      if (notes) view_.slots->set_note(slow_calls_ >= 2 && bytes_since_probe_ >= kSlowNoteBytes ? 1 : 0);
      check_calls_match(ctx, &call);
      if (notes) {
        view_.slots->set_note(0);
        if (view_.slots->notes() != 0) {
          probe_again(deadline, fmt::format("measuring again in {} call #{} of this group: a rank's windows were "
                                            "slower than the last measurement predicted", to_string(args.coll), seq));
        }
      }
    } else if (check) {
      ctx.call = &call;  // the algorithm's first exchange carries the check
    }
    if (repeat_.nothing) return;
    run_algorithm(ctx, *algo, held.data());
  }

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

  // The full path of run() for a call whose shape is not repeat_'s (or that names an algorithm, or came with a
  // problem): validates it and chooses its algorithm; a call this rank cannot run is refused (throws). A valid
  // call's shape and what follows from it become repeat_; one that names its algorithm is not remembered as a
  // repeat (its shape alone does not decide the algorithm).
  void learn(const Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
             std::string_view found, const CallShape& shape, uint64_t generation) {
    repeat_.forget();
    std::string problem(found);
    if (problem.empty()) problem = call_problem(args, view_);
    const Algorithm* algo = nullptr;
    if (problem.empty()) {
      try {
        algo = &selector_.choose(args, view_, algorithm);
      } catch (const InvalidUsageError& e) {
        problem = e.what();
      }
    }
    if (!problem.empty()) refuse(args, deadline, seq, problem);
    PerAlgorithm& mine = per_algorithm_[algorithm_index(*algo)];  // runs are serialised per group, so no lock
    if (mine.what.empty()) mine.what = fmt::format("{}[{}] rank {}/{}", to_string(args.coll), algo->name, view_.rank,
                                                   view_.size);
    repeat_.shape = shape;
    repeat_.generation = generation;
    repeat_.mine = &mine;
    repeat_.call = describe_call(args, algo->name);
    repeat_.chunk = chunk_for(args);
    const double n = model_bytes(args, view_.size);
    repeat_.probe_bytes = !args.vector_variant && n >= kReprobeFromBytes ? n : 0;
    // On a group with slots only the slot algorithms carry the check themselves: the others' first exchanges go by
    // messages, where a rank whose call differs would never meet them.
    repeat_.fused = algo->fuses_check && (view_.slots == nullptr || algo->uses_slots);
    repeat_.nothing = moves_nothing(args);
    repeat_.reducing = is_reducing(args.coll);
    const Buffer& primary = args.send.data != nullptr || args.send.count > 0 ? args.send : args.recv;  // Context's
    repeat_.probe_memory = largest_bytes(args) >= kProbeScratchBytes && primary.device.is_host();
    // A slot row's exchange, planned once for the shape (slots.hpp, SlotPlan): for the call the check gives it.
    const bool check = check_calls_ && view_.size > 1;
    repeat_.planned = algo->uses_slots && !repeat_.nothing &&
                      plan_slot(args, view_, check ? &repeat_.call : nullptr, &repeat_.slot_plan);
    // A planned reduce[slot] takes no work buffer: a rank other than the root publishes its input where it lies and
    // has no output, and the root combines into its output (needs_work_scratch says so for it already) - unless
    // premul_sum's input is to be scaled first, into the work buffer.
    repeat_.work_scratch = repeat_.reducing && needs_work_scratch(args, view_.rank) &&
                           !(repeat_.planned && args.coll == Collective::kReduce && args.red.op != ReduceOp::kPreMulSum);
    // The slot rows carry the check in their exchange (fused); the plan was made for it (or for none, check off).
    repeat_.direct = repeat_.planned && (repeat_.fused || !check) && !repeat_.work_scratch && !repeat_.probe_memory;
    repeat_.algo = algo;
    // Named algorithms and premul_sum's scale (which validation checks, and the shape leaves out) are never
    // repeats: the next call goes the full way again.
    if (!algorithm.empty() || !shape.cacheable) repeat_.shape = CallShape{};
  }

  // A call of a size class the tuner has not measured (tuner.hpp), whose choice is the cost model's: checks it on
  // every rank (an invalid or mismatched call fails there, alike everywhere, as it would have without the tuner),
  // then measures every algorithm of the class with calls numbered apart from the group's, and learns the
  // fastest. Returns whether the call was checked. The measurement's calls come back through run() with their
  // algorithm named, so they are never measured themselves.
  bool measure_first(const Args& args, const Deadline& deadline, uint64_t seq) {
    if (measuring_) return false;
    const int cls = tune_class(args, view_.size);
    const int set = rule_set_;  // the set it is measured into
    if (cls < 0 || tuned_classes_.count({args.coll, cls, set}) != 0 || selector_.decided(args, view_)) return false;
    if (tune_by_windows_ && model_bytes(args, view_.size) >= window_tune_max_bytes(set, args.coll)) return false;
    learn(args, "", deadline, seq, {}, CallShape::of(args), selector_.generation());  // refuses an invalid call
    try {
      Context c(args, view_, deadline, seq, repeat_.mine->what, chunk_for(args));
      check_calls_match(c, &repeat_.call);
    } catch (...) {
      // This rank's shape is valid, but the group's calls were not all this one: not a repeat, so that the next
      // call of this shape comes here again, as it does on the ranks whose calls differed.
      repeat_.forget();
      throw;
    }
    // Every rank's call is this one: every rank measures this class now, once.
    tuned_classes_.insert({args.coll, cls, set});
    measuring_ = true;
    TuneResult result;
    try {
      result = measure_algorithms(args, view_, *repeat_.algo, seq, [&](const Args& a, const std::string& algorithm) {
        run(a, algorithm, Deadline::after(deadline.timeout()), kTuneSeqBase | (tune_calls_++ & kTuneSeqMask), {});
      });
    } catch (const Error& e) {
      measuring_ = false;
      rethrow_prefixed(e, fmt::format("{} rank {}/{} (call #{} of this group): while measuring its algorithms "
                                      "before it runs (DCOMM_TUNE; off turns it off): ",
                                      to_string(args.coll), view_.rank, view_.size, seq));
    } catch (...) {
      measuring_ = false;
      throw;
    }
    measuring_ = false;
    if (result.algorithm.empty()) return true;
    Rule rule;
    rule.coll = args.coll;
    rule.ranks = view_.size;
    rule.min_bytes = uint64_t{1} << cls;
    rule.max_bytes = uint64_t{1} << (cls + 1);
    rule.algorithm = result.algorithm;
    DCOMM_DEBUG("collectives engine rank {}/{}: {} measured, {}: {}", view_.rank, view_.size, to_string(args.coll),
                describe(rule), result.how);
    selector_.add_learned(std::move(rule), std::move(result.how));
    if (!tune_out_.empty() && view_.rank == 0) save_learned(tune_out_, selector_.learned_rules());
    return true;
  }

  // The pipelining unit: a device message costs ~50 host ones (kDefaultDeviceChunkBytes). The call check compares
  // device_pieces() (CallDescriptor::device), so every rank of a call cuts it alike.
  std::size_t chunk_for(const Args& args) const { return device_pieces(args) ? device_chunk_bytes_ : chunk_bytes_; }

  // A call this rank cannot run: it takes part in the call check marked invalid (check_calls_match throws the
  // same error on every rank), or, with the check off, throws here alone.
  [[noreturn]] void refuse(const Args& args, const Deadline& deadline, uint64_t seq, const std::string& problem) const {
    const std::string what =
        fmt::format("{}{} rank {}/{}", to_string(args.coll), args.vector_variant ? "_v" : "", view_.rank, view_.size);
    if (check_calls_ && view_.size > 1) {
      Context ctx(args, view_, deadline, seq, what, chunk_for(args));
      CallDescriptor call = describe_call(args, "");
      check_calls_match(ctx, &call, nullptr, problem);
      throw Error(ErrorCode::kInternal, fmt::format("{}: the call check let an invalid call pass", what));
    }
    throw InvalidUsageError(fmt::format(
        "{}: {}{}", what, problem,
        view_.size > 1 ? fmt::format("; with DCOMM_CHECK_CALLS=0 the other ranks are not told: their call #{} "
                                     "waits for this rank until it times out",
                                     seq)
                       : std::string()));
  }

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

  // Before the call after the one that made the probe due (so that a rank that died in between fails the call that
  // could not complete, not the one that did), or right after a call check that carried a rank's note that its
  // windows were slow: every rank at the same point of the same call. `during` names it for errors and the log.
  void probe_again(const Deadline& deadline, const std::string& during) {
    probe_due_ = false;
    slow_calls_ = 0;
    bytes_since_probe_ = 0;
    calls_since_probe_ = 0;
    std::string note;
    const WindowProbe probe = probe_cached_windows(view_, true, &note, deadline, during, &probe_rig_);
    DCOMM_DEBUG("collectives engine rank {}/{}: window stores measured again ({}): {}", view_.rank, view_.size, during,
                note);
    // The new yardstick for the watch (note_window_round) in any case; the choices only when the answer changed:
    // the stores (large or small calls'), or where plain ones fill small calls' windows, the price of small rounds
    // (on its grid: small_price).
    const bool changed_stores = probe.cached != view_.hierarchy->topo.cached_windows;
    const bool changed_answer =
        changed_stores || probe.cached_small != view_.hierarchy->topo.cached_small_windows ||
        (probe.cached_small && probe.small_seconds_per_byte != view_.hierarchy->topo.window_small_seconds_per_byte);
    if (changed_stores) {
      DCOMM_INFO("collectives engine rank {}/{}: shared-memory windows now filled with {} ({})", view_.rank,
                 view_.size, probe.cached ? "plain stores" : "non-temporal stores", note);
    }
    auto changed = std::make_shared<Hierarchy>(*view_.hierarchy);
    changed->topo.cached_windows = probe.cached;
    changed->topo.cached_small_windows = probe.cached_small;
    changed->topo.window_streamed_seconds = probe.streamed_seconds;
    changed->topo.window_plain_seconds = probe.plain_seconds;
    changed->topo.window_small_seconds_per_byte = probe.small_seconds_per_byte;
    {
      std::lock_guard<std::mutex> lock(view_mutex_);
      view_.hierarchy = std::move(changed);
    }
    window_set_ = window_rule_set(view_.hierarchy->topo);
    if (changed_answer) selector_.invalidate();
  }

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
  std::vector<PerAlgorithm> per_algorithm_{algorithm_table().size()};
  Repeat repeat_;
};

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
