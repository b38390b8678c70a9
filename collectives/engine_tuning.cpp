// The Engine's measurements (engine_impl.hpp): the tuner's at the first call of a size class (tuner.hpp), and the
// window stores measured again as large calls go by (window_probe.hpp).

#include "collectives/engine_impl.hpp"

#include <fmt/format.h>

#include <dcomm/error.hpp>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "collectives/call_check.hpp"
#include "collectives/call_shape.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/rules.hpp"
#include "collectives/selector.hpp"
#include "collectives/topology.hpp"
#include "collectives/tuner.hpp"
#include "collectives/window_probe.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

// A call of a size class the tuner has not measured (tuner.hpp), whose choice is the cost model's: checks it on
// every rank (an invalid or mismatched call fails there, alike everywhere, as it would have without the tuner),
// then measures every algorithm of the class with calls numbered apart from the group's, and learns the
// fastest. Returns whether the call was checked. The measurement's calls come back through run() with their
// algorithm named, so they are never measured themselves.
bool EngineImpl::measure_first(const Args& args, const Deadline& deadline, uint64_t seq) {
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
  TuneResult result;
  measuring(args, seq, deadline, "measuring its algorithms before it runs", [&](const TuneCall& run_tuning) {
    result = measure_algorithms(args, view_, *repeat_.algo, seq, run_tuning);
  });
  if (result.algorithm.empty()) return true;
  Rule rule = class_rule(args.coll, view_.size, cls, result.algorithm);
  DCOMM_DEBUG("collectives engine rank {}/{}: {} measured, {}: {}", view_.rank, view_.size, to_string(args.coll),
              describe(rule), result.how);
  if (!result.runner_up.empty()) {
    trials_.insert_or_assign(TrialKey{args.coll, cls, set},
                             LoopTrial(result.algorithm, result.runner_up, kTieMargin, result.how));
  }
  selector_.add_learned(std::move(rule), std::move(result.how));
  if (!tune_out_.empty() && view_.rank == 0) save_learned(tune_out_, selector_.learned_rules());
  return true;
}

void EngineImpl::measuring(const Args& args, uint64_t seq, const Deadline& deadline, std::string_view during,
                           const std::function<void(const TuneCall&)>& body) {
  measuring_ = true;
  try {
    body([&](const Args& a, const std::string& algorithm) {
      run(a, algorithm, Deadline::after(deadline.timeout()), kTuneSeqBase | (tune_calls_++ & kTuneSeqMask), {});
    });
  } catch (const Error& e) {
    measuring_ = false;
    rethrow_prefixed(e, fmt::format("{} rank {}/{} (call #{} of this group): while {} (DCOMM_TUNE; off turns it off): ",
                                    to_string(args.coll), view_.rank, view_.size, seq, during));
  } catch (...) {
    measuring_ = false;
    throw;
  }
  measuring_ = false;
}

int EngineImpl::trial_row(LoopTrial* trial, const Args& args, const Deadline& deadline, uint64_t seq) {
  const int row = trial->next_row();
  if (row < 0) return -1;
  const double untimed = std::numeric_limits<double>::quiet_NaN();
  // A call of the class whose choice is not the trial's (a set_algorithm() since, a shape the rows do not take),
  // or that the runner-up cannot run: every rank alike, the call's shape decides.
  if (repeat_.algo == nullptr || trial->name(0) != repeat_.algo->name) {
    trial->record(row, untimed);
    return -1;
  }
  if (row == 1) {
    const Algorithm* other = find_algorithm(args.coll, trial->name(1));
    if (other == nullptr || !other->supports(args, view_)) {
      trial->record(row, untimed);
      return -1;
    }
    learn(args, other->name, deadline, seq, {}, CallShape::of(args), selector_.generation());
  }
  return row;
}

void EngineImpl::start_model_trial(const Args& args) {
  const int cls = tune_class(args, view_.size);
  if (cls < 0 || repeat_.algo == nullptr) return;
  const TrialKey key{args.coll, cls, rule_set_};
  if (!model_tried_.insert(key).second || trials_.count(key) != 0 || selector_.decided(args, view_)) return;
  // Its choice is the model's cheapest row: the runner-up is the next cheapest, where within kModelWithin of its price.
  const Algorithm& chosen = *repeat_.algo;
  double chosen_seconds = -1;
  const Prediction* other = nullptr;
  const std::vector<Prediction> rows = predict(args, view_, selector_.params());
  for (const Prediction& p : rows) {
    if (p.algorithm == &chosen) {
      chosen_seconds = p.seconds;
    } else if (!p.algorithm->by_name_only && (other == nullptr || p.seconds < other->seconds)) {
      other = &p;
    }
  }
  if (other == nullptr || !(chosen_seconds > 0) || other->seconds > LoopTrial::kModelWithin * chosen_seconds) return;
  trials_.insert_or_assign(key, LoopTrial(chosen.name, other->algorithm->name, kTieMargin,
                                          fmt::format("the cost model's choice ({} {:.1f} us, {} {:.1f} us priced)",
                                                      chosen.name, chosen_seconds * 1e6, other->algorithm->name,
                                                      other->seconds * 1e6),
                                          /*of_model=*/true));
  repeat_.direct = false;  // the class's calls count through run_full() from the next on
}

void EngineImpl::finish_trial(const Args& args, LoopTrial& trial, const Deadline& deadline, uint64_t seq) {
  const int cls = tune_class(args, view_.size);
  const TrialKey key{args.coll, cls, rule_set_};
  std::vector<double> paces = trial.paces();
  // The agreement's own call is neither measured nor counted (measuring()).
  measuring(args, seq, deadline, "agreeing on the times of its algorithms on this program's calls",
            [&](const TuneCall& run_tuning) {
              Args a;
              a.coll = Collective::kAllReduce;
              a.red.op = ReduceOp::kMax;
              a.send = a.recv = Buffer(paces.data(), paces.size());
              run_tuning(a, "");
            });
  const int keep = trial.keep(paces);
  Rule rule = class_rule(args.coll, view_.size, cls, trial.name(keep));
  std::string how = trial.describe(paces, keep);
  if (keep == 1) {
    DCOMM_INFO("collectives engine rank {}/{}: {} tried again, {}: {}", view_.rank, view_.size, to_string(args.coll),
               describe(rule), how);
  } else {
    DCOMM_DEBUG("collectives engine rank {}/{}: {} tried again, {}: {}", view_.rank, view_.size, to_string(args.coll),
                describe(rule), how);
  }
  // A trial of the model's own choice that keeps it learns nothing: the model goes on choosing (and follows the
  // windows' state); a measured choice's rule gets the trial's description either way.
  if (keep == 1 || !trial.of_model()) selector_.replace_learned(std::move(rule), std::move(how));
  if (keep == 1 && !tune_out_.empty() && view_.rank == 0) save_learned(tune_out_, selector_.learned_rules());
  trials_.erase(key);  // `trial` is gone from here on
  repeat_.forget();
}

// Before the call after the one that made the probe due (so that a rank that died in between fails the call that
// could not complete, not the one that did), or right after a call check that carried a rank's note that its
// windows were slow: every rank at the same point of the same call. `during` names it for errors and the log.
void EngineImpl::probe_again(const Deadline& deadline, const std::string& during) {
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

}  // namespace dcomm::coll
