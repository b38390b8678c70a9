#pragma once
// Which algorithm runs a call: the one the call names, else the group's set_algorithm() override, else
// DCOMM_ALGO, else a measured rule (DCOMM_RULES_FILE, collectives/rules.hpp), else the cost model's cheapest. Every input is the same on every rank (the cost model's numbers
// are agreed at creation), so every rank picks alike; the call check catches the rest.

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "collectives/cost_model.hpp"
#include "collectives/rules.hpp"

namespace dcomm::coll {

/// Parses DCOMM_ALGO-style text: "allreduce:ring,broadcast:binomial" (all_reduce, allreduce and all-reduce
/// alike). Throws InvalidUsageError naming the bad entry and listing the valid collectives or algorithms.
std::map<Collective, std::string> parse_algorithm_spec(const std::string& spec);

/// Throws InvalidUsageError listing the valid names when `name` is not an algorithm of `c`.
const Algorithm& algorithm_or_throw(Collective c, const std::string& name, const std::string& where);

/// explain()'s table: one line per prediction, names padded to the longest so the times line up, the cheapest and
/// the by-name-only rows marked; then the `unfit` rows, which cannot run the call on this group, without a time.
std::string format_predictions(const std::vector<Prediction>& predictions, const Algorithm* best,
                               const std::vector<const Algorithm*>& unfit = {});

class Selector {
 public:
  /// `rules`: DCOMM_RULES_FILE's (from `rules_path`), taken before the cost model.
  Selector(CostParams params, std::string params_source, std::map<Collective, std::string> env_forced,
           std::vector<Rule> rules = {}, std::string rules_path = "");

  /// "" returns `c` to the environment's choice or the cost model.
  void set_override(Collective c, const std::string& name);
  /// Throws InvalidUsageError for an unknown name, or a named algorithm that cannot run this call.
  const Algorithm& choose(const Args& args, const GroupView& view, const std::string& requested) const;
  std::string explain(Collective c, std::size_t bytes, const GroupView& view, Device device = Device::host()) const;
  const CostParams& params() const { return params_; }
  /// Changes with every set_override() and invalidate(): a choice remembered under another generation may be stale.
  uint64_t generation() const { return overrides_generation_.load(std::memory_order_acquire); }
  /// What the model prices changed (the group's topology: Topology::cached_windows): choices are made again.
  void invalidate() { overrides_generation_.fetch_add(1, std::memory_order_release); }
  /// A rule this group measured itself (DCOMM_TUNE, collectives/tuner.hpp), taken after the file's rules and
  /// before the cost model; `how` is what explain() shows of the measurement. Makes the choices again.
  void add_learned(Rule rule, std::string how);
  /// The learned rule of the same collective, group size and range in the set in use, replaced by `rule` (the
  /// loop trial's answer: tuner.hpp, LoopTrial). Makes the choices again.
  void replace_learned(Rule rule, std::string how);
  /// The learned rules of the set in use, in the order learned.
  std::vector<Rule> learned_rules() const;
  /// Which set of learned rules counts from now on (0 at first): the engine keeps one per state of its windows'
  /// stores, measured where the machine behaved that way (engine.cpp, tune_by_windows). Rules are learned into the
  /// set in use. Makes the choices again when the set changes.
  void use_learned(int set);
  /// Whether a call's choice is already made without the model: a set_algorithm() or DCOMM_ALGO name for its
  /// collective, or a rule (the file's or a learned one) for its size. The tuner measures only the other calls.
  bool decided(const Args& args, const GroupView& view) const;

 private:
  /// What a choice depends on besides the group: calls of one shape get the same algorithm, so the choice is
  /// remembered per shape (the cost model and the forced names cost more than a small message's latency).
  /// Every supports() in the table decides from these fields alone.
  struct Shape {
    Collective coll{};
    bool vector_variant = false;
    bool in_place = false;
    DType dtype{};
    Device send_device{}, recv_device{};
    std::size_t send_count = 0, recv_count = 0;
    int root = 0;
    bool operator==(const Shape&) const = default;
  };
  struct Remembered {
    Shape shape;
    uint64_t generation = 0;  ///< overrides_generation_ when it was chosen
    const Algorithm* algorithm = nullptr;
  };
  static Shape shape_of(const Args& args);
  const Algorithm& choose_unnamed(const Args& args, const GroupView& view) const;
  /// The forced name for `c` and where it came from; empty when none.
  std::string forced(Collective c, std::string* origin) const;
  /// The rule for this call whose algorithm handles it, or null: the file's first, then the learned ones
  /// (`learned` set true then, and `how` to the measurement's description when given).
  const Rule* rule_for(const Args& args, const GroupView& view, bool* learned = nullptr,
                       std::string* how = nullptr) const;

  CostParams params_;
  std::string params_source_;
  std::map<Collective, std::string> env_forced_;
  std::vector<Rule> rules_;
  std::string rules_path_;
  mutable std::mutex mu_;
  std::map<Collective, std::string> overrides_;
  struct Learned {
    Rule rule;
    std::string how;
    int set = 0;  ///< use_learned()'s set when it was learned
    bool replaced = false;  ///< by a later rule of the same range (replace_learned): skipped, kept for references
  };
  std::deque<Learned> learned_;  ///< under mu_; only grows (a class is measured once a set), so references stay valid
  int learned_set_ = 0;          ///< under mu_
  std::atomic<uint64_t> overrides_generation_{1};
  // Touched only by choose(), which the engine calls for one call of the group at a time.
  mutable std::array<Remembered, 8> remembered_{};
  mutable std::size_t next_slot_ = 0;
};

}  // namespace dcomm::coll
