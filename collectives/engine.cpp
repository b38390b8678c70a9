// The Engine's path of a call (engine_impl.hpp): validate, select, check the call across ranks, prepare the
// reduction, run the algorithm.

#include "collectives/engine_impl.hpp"

#include <fmt/format.h>

#include <chrono>
#include <dcomm/error.hpp>
#include <string>
#include <string_view>

#include "collectives/call_check.hpp"
#include "collectives/call_shape.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/reducing_call.hpp"
#include "collectives/selector.hpp"
#include "collectives/slots.hpp"
#include "collectives/validate.hpp"
#include "collectives/window_probe.hpp"

namespace dcomm::coll {

EngineImpl::~EngineImpl() {
  if (view_.slots) view_.slots->settle_quietly(view_, Deadline::after(kSettleTimeout));
}

// run() for any call: out of line, so that run()'s direct way saves and restores few registers.
[[gnu::noinline]] void EngineImpl::run_full(const Args& args, const std::string& algorithm, const Deadline& deadline,
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
  // A class whose measured choice is on trial against its runner-up on the program's own calls (tuner.hpp).
  LoopTrial* trial = algorithm.empty() && found.empty() ? trial_for(args) : nullptr;
  if (!repeat) learn(args, algorithm, deadline, seq, found, CallShape::of(args), selector_.generation());
  const int row = trial != nullptr && !checked ? trial_row(trial, args, deadline, seq) : -1;
  // The first call of a class the cost model chooses for: its choice tried on the program's calls too.
  if (tune_by_windows_ && !repeat && !checked && trial == nullptr && algorithm.empty() && found.empty()) {
    start_model_trial(args);
  }
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
  const auto t0 = row >= 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
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
  if (row < 0) return;
  trial->record(row, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (trial->due()) finish_trial(args, *trial, deadline, seq);
}

// The full path of run() for a call whose shape is not repeat_'s (or that names an algorithm, or came with a
// problem): validates it and chooses its algorithm; a call this rank cannot run is refused (throws). A valid
// call's shape and what follows from it become repeat_; one that names its algorithm is not remembered as a
// repeat (its shape alone does not decide the algorithm).
void EngineImpl::learn(const Args& args, const std::string& algorithm, const Deadline& deadline, uint64_t seq,
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
  // A class on trial counts every call, which only run_full() does.
  if (repeat_.direct && trial_for(args) != nullptr) repeat_.direct = false;
  repeat_.algo = algo;
  // Named algorithms and premul_sum's scale (which validation checks, and the shape leaves out) are never
  // repeats: the next call goes the full way again.
  if (!algorithm.empty() || !shape.cacheable) repeat_.shape = CallShape{};
}

// A call this rank cannot run: it takes part in the call check marked invalid (check_calls_match throws the
// same error on every rank), or, with the check off, throws here alone.
[[noreturn]] void EngineImpl::refuse(const Args& args, const Deadline& deadline, uint64_t seq,
                                     const std::string& problem) const {
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

}  // namespace dcomm::coll
