#include "collectives/selector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/topology.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

constexpr Collective kCollectives[] = {Collective::kAllReduce,     Collective::kBroadcast, Collective::kReduce,
                                       Collective::kScatter,       Collective::kGather,    Collective::kAllGather,
                                       Collective::kReduceScatter, Collective::kAllToAll,  Collective::kBarrier};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string collective_names() {
  std::string out;
  for (Collective c : kCollectives) out += (out.empty() ? "" : ", ") + std::string(to_string(c));
  return out;
}

std::string format_seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

}  // namespace

std::string format_predictions(const std::vector<Prediction>& predictions, const Algorithm* best,
                               const std::vector<const Algorithm*>& unfit) {
  // Names as wide as the longest, so the times line up whatever a new algorithm is called.
  std::size_t width = 0;
  for (const Prediction& p : predictions) width = std::max(width, std::string_view(p.algorithm->name).size());
  for (const Algorithm* a : unfit) width = std::max(width, std::string_view(a->name).size());
  std::string out;
  for (const Prediction& p : predictions) {
    out += fmt::format("  {:<{}} {:>12}{}\n", p.algorithm->name, width, format_seconds(p.seconds),
                       p.algorithm == best ? "  <- cheapest" : (p.algorithm->by_name_only ? "  (by name only)" : ""));
  }
  for (const Algorithm* a : unfit) out += fmt::format("  {:<{}} {:>12}  (not for this group)\n", a->name, width, "-");
  return out;
}

const Algorithm& algorithm_or_throw(Collective c, const std::string& name, const std::string& where) {
  const Algorithm* a = find_algorithm(c, name);
  if (a == nullptr) {
    throw InvalidUsageError(
        fmt::format("{}: unknown {} algorithm '{}'; valid names: {}", where, to_string(c), name, algorithm_names(c)));
  }
  return *a;
}

std::map<Collective, std::string> parse_algorithm_spec(const std::string& spec) {
  std::map<Collective, std::string> out;
  std::size_t at = 0;
  while (at <= spec.size()) {
    std::size_t comma = spec.find(',', at);
    std::string item = trim(spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    at = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    Collective c{};
    if (colon == std::string::npos || !parse_collective(trim(item.substr(0, colon)), &c)) {
      throw InvalidUsageError(
          fmt::format("DCOMM_ALGO entry '{}' is not <collective>:<algorithm> (e.g. "
                      "'allreduce:ring,broadcast:binomial'); collectives: {}",
                      item, collective_names()));
    }
    std::string name = trim(item.substr(colon + 1));
    out[c] = algorithm_or_throw(c, name, "DCOMM_ALGO").name;
  }
  return out;
}

Selector::Selector(CostParams params, std::string params_source, std::map<Collective, std::string> env_forced,
                   std::vector<Rule> rules, std::string rules_path)
    : params_(params),
      params_source_(std::move(params_source)),
      env_forced_(std::move(env_forced)),
      rules_(std::move(rules)),
      rules_path_(std::move(rules_path)) {}

const Rule* Selector::rule_for(const Args& args, const GroupView& view, bool* learned, std::string* how) const {
  auto usable = [&](const Rule* r) {
    if (r == nullptr) return false;
    const Algorithm* a = find_algorithm(args.coll, r->algorithm);
    return a != nullptr && a->supports(args, view);
  };
  const double n = model_bytes(args, view.size);
  const bool device = on_device(args);
  if (!rules_.empty()) {
    const Rule* r = find_rule(rules_, args.coll, view.size, n, device);
    if (usable(r)) return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const Learned& l : learned_) {
    const Rule* r = &l.rule;
    if (l.replaced || l.set != learned_set_ || !rule_matches(*r, args.coll, view.size, n, device) || !usable(r)) {
      continue;
    }
    if (learned != nullptr) *learned = true;
    if (how != nullptr) *how = l.how;
    return r;  // a deque that only grows: the rule stays where it is
  }
  return nullptr;
}

void Selector::add_learned(Rule rule, std::string how) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    learned_.push_back(Learned{std::move(rule), std::move(how), learned_set_});
  }
  invalidate();
}

void Selector::replace_learned(Rule rule, std::string how) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Learned& l : learned_) {
      const Rule& r = l.rule;
      if (l.set == learned_set_ && r.coll == rule.coll && r.ranks == rule.ranks && r.min_bytes == rule.min_bytes &&
          r.max_bytes == rule.max_bytes && r.device == rule.device) {
        l.replaced = true;
      }
    }
    learned_.push_back(Learned{std::move(rule), std::move(how), learned_set_});
  }
  invalidate();
}

void Selector::use_learned(int set) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (learned_set_ == set) return;
    learned_set_ = set;
  }
  invalidate();
}

std::vector<Rule> Selector::learned_rules() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Rule> out;
  for (const Learned& l : learned_) {
    if (l.set == learned_set_ && !l.replaced) out.push_back(l.rule);
  }
  return out;
}

bool Selector::decided(const Args& args, const GroupView& view) const {
  std::string origin;
  if (!forced(args.coll, &origin).empty()) return true;
  return rule_for(args, view) != nullptr;
}

void Selector::set_override(Collective c, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    overrides_.erase(c);
  } else {
    overrides_[c] = algorithm_or_throw(c, name, "set_algorithm").name;
  }
  overrides_generation_.fetch_add(1, std::memory_order_release);
}

Selector::Shape Selector::shape_of(const Args& a) {
  Shape s;
  s.coll = a.coll;
  s.vector_variant = a.vector_variant;
  s.in_place = a.send.data == a.recv.data;
  s.dtype = a.send.dtype;
  s.send_device = a.send.device;
  s.recv_device = a.recv.device;
  s.send_count = a.send.count;
  s.recv_count = a.recv.count;
  s.root = a.root;
  return s;
}

std::string Selector::forced(Collective c, std::string* origin) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = overrides_.find(c); it != overrides_.end()) {
    *origin = "set_algorithm";
    return it->second;
  }
  if (auto it = env_forced_.find(c); it != env_forced_.end()) {
    *origin = "DCOMM_ALGO";
    return it->second;
  }
  return "";
}

const Algorithm& Selector::choose(const Args& args, const GroupView& view, const std::string& requested) const {
  // Formatted only when needed: choose() runs on every call, and a string per call shows in small-message latency.
  auto where = [&] { return fmt::format("{} rank {}/{}", to_string(args.coll), view.rank, view.size); };
  if (!requested.empty()) {
    // A pointer, not a reference bound through the conditional: gcc 13 takes the reference for one to the
    // temporary string (-Wdangling-reference).
    const Algorithm* found = find_algorithm(args.coll, requested);
    if (found == nullptr) found = &algorithm_or_throw(args.coll, requested, where());
    const Algorithm& a = *found;
    if (!a.supports(args, view)) {
      throw InvalidUsageError(fmt::format(
          "{}: algorithm '{}' does not handle this call ({}); leave the algorithm empty to let dcomm choose", where(),
          requested,
          args.vector_variant            ? "a v-variant"
          : a.supports == &supports_hier ? "it needs a group that spans two nodes or more; this group is on one node"
                                         : "its limits on size, group or memory exclude it"));
    }
    return a;
  }
  const Shape shape = shape_of(args);
  const uint64_t generation = overrides_generation_.load(std::memory_order_acquire);
  for (const Remembered& r : remembered_) {
    if (r.generation == generation && r.shape == shape) return *r.algorithm;
  }
  const Algorithm& chosen = choose_unnamed(args, view);
  remembered_[next_slot_] = Remembered{shape, generation, &chosen};
  next_slot_ = (next_slot_ + 1) % remembered_.size();
  return chosen;
}

const Algorithm& Selector::choose_unnamed(const Args& args, const GroupView& view) const {
  auto where = [&] { return fmt::format("{} rank {}/{}", to_string(args.coll), view.rank, view.size); };
  std::string origin;
  std::string name = forced(args.coll, &origin);
  if (!name.empty()) {
    const Algorithm* found = find_algorithm(args.coll, name);
    if (found == nullptr) found = &algorithm_or_throw(args.coll, name, where());
    const Algorithm& a = *found;
    if (a.supports(args, view)) return a;
    // A group-wide preference that cannot run this particular call (a v-variant) falls back to the model.
    DCOMM_DEBUG("{}: {} algorithm '{}' does not handle this call; using the cost model", where(), origin, name);
  }
  if (const Rule* r = rule_for(args, view)) return *find_algorithm(args.coll, r->algorithm);
  const Algorithm* best = cheapest(args, view, params_);
  if (best == nullptr) {
    throw Error(ErrorCode::kInternal,
                fmt::format("{}: no algorithm handles this call - a bug, please report it", where()));
  }
  return *best;
}

std::string Selector::explain(Collective c, std::size_t bytes, const GroupView& view, Device device) const {
  Args args = sample_args(c, bytes, view.size, device);
  const bool on_device = !device.is_host();
  const CostParams shown = on_device ? device_priced(params_) : params_;
  std::string out = fmt::format(
      "{} of {} on {} ranks{} (alpha {}, beta {:.3f} ns/B, gamma {:.4f} ns/B, chunk {}; from the {}):\n",
      to_string(c), format_bytes(bytes), view.size, on_device ? fmt::format(", buffers on {}", to_string(device)) : "",
      format_seconds(shown.alpha), shown.beta * 1e9, shown.gamma * 1e9,
      format_bytes(static_cast<std::size_t>(shown.chunk_bytes)),
      on_device ? "device's costs (docs/cuda.md); the call check's messages at the host's" : params_source_);
  if (view.hierarchy) {
    const Topology& t = view.hierarchy->topo;
    out += fmt::format("topology: {}\n", t.describe());
    if (t.node_count() > 1) {
      out += fmt::format(
          "links: between nodes alpha {}, beta {:.3f} ns/B (the flat algorithms' link); within a node "
          "alpha {}, beta {:.3f} ns/B\n",
          format_seconds(params_.alpha), params_.beta * 1e9, format_seconds(params_.alpha_intra),
          params_.beta_intra * 1e9);
    }
  }
  const Algorithm* best = cheapest(args, view, params_);
  std::vector<Prediction> predictions = predict(args, view, params_);
  std::vector<const Algorithm*> unfit;  // rows that cannot run on this group (the hierarchical ones on one node)
  for (const Algorithm* a : algorithms_for(c)) {
    if (std::none_of(predictions.begin(), predictions.end(), [&](const Prediction& p) { return p.algorithm == a; })) {
      unfit.push_back(a);
    }
  }
  out += format_predictions(predictions, best, unfit);
  std::string origin, how;
  std::string name = forced(c, &origin);
  if (!name.empty()) {
    out += fmt::format("choice: {} (forced by {}; the cost model would pick {})", name, origin, best->name);
  } else if (bool learned = false; const Rule* r = rule_for(args, view, &learned, &how)) {
    if (learned) {
      out += fmt::format("choice: {} (measured by this group, DCOMM_TUNE: {}; the cost model would pick {})",
                         r->algorithm, how, best->name);
    } else {
      out += fmt::format("choice: {} (measured: {}, rule '{}'; the cost model would pick {})", r->algorithm,
                         rules_path_, describe(*r), best->name);
    }
  } else {
    out += fmt::format("choice: {} (cost model)", best->name);
  }
  return out;
}

}  // namespace dcomm::coll
