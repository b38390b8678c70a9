#pragma once
// Which algorithm runs a call: the one the call names, else the group's set_algorithm() override, else
// DCOMM_ALGO, else the cost model's cheapest. Every input is the same on every rank (the cost model's numbers
// are agreed at creation), so every rank picks alike; the call check catches the rest.

#include <map>
#include <mutex>
#include <string>

#include "collectives/cost_model.hpp"

namespace dcomm::coll {

/// Parses DCOMM_ALGO-style text: "allreduce:ring,broadcast:binomial" (all_reduce, allreduce and all-reduce
/// alike). Throws InvalidUsageError naming the bad entry and listing the valid collectives or algorithms.
std::map<Collective, std::string> parse_algorithm_spec(const std::string& spec);

/// Throws InvalidUsageError listing the valid names when `name` is not an algorithm of `c`.
const Algorithm& algorithm_or_throw(Collective c, const std::string& name, const std::string& where);

class Selector {
 public:
  Selector(CostParams params, std::string params_source, std::map<Collective, std::string> env_forced);

  /// "" returns `c` to the environment's choice or the cost model.
  void set_override(Collective c, const std::string& name);
  /// Throws InvalidUsageError for an unknown name, or a named algorithm that cannot run this call.
  const Algorithm& choose(const Args& args, const GroupView& view, const std::string& requested) const;
  std::string explain(Collective c, std::size_t bytes, const GroupView& view) const;
  const CostParams& params() const { return params_; }

 private:
  /// The forced name for `c` and where it came from; empty when none.
  std::string forced(Collective c, std::string* origin) const;

  CostParams params_;
  std::string params_source_;
  std::map<Collective, std::string> env_forced_;
  mutable std::mutex mu_;
  std::map<Collective, std::string> overrides_;
};

}  // namespace dcomm::coll
