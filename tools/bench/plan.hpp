#pragma once
// What a run measures: the options expanded, once the world size is known, into groups of cases
// (a collective, dtype and op) each with its algorithms and its sizes laid out for the world.

#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/args.hpp"
#include "tools/bench/sizes.hpp"

namespace dcomm::bench {

/// A mistake in the arguments only visible after joining (a root beyond the world, an unknown algorithm):
/// reported like a parse error, with exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Group {
  Coll coll = Coll::kAllReduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;       ///< meaningful for reducing collectives only
  std::vector<std::string> algos;     ///< "" is the group's own choice
  std::vector<Layout> layouts;
};

/// `registry(c)` lists the algorithms registered for c, or nullopt when unknown (then names pass unchecked
/// and "all" is refused). Throws UsageError.
template <typename Registry>
std::vector<Group> plan(const Options& o, int world, Registry&& registry);

/// The sizes of one collective: the sweep laid out for the world, dropping sizes too small to split over the
/// ranks and sizes that round to the previous one.
std::vector<Layout> plan_layouts(const Options& o, Coll c, DType dtype, int world);
/// The algorithm list of one collective for --algo (see plan()); empty: the named algorithm is not registered
/// for this collective.
std::vector<std::string> plan_algos(const std::string& algo, Coll c,
                                    const std::optional<std::vector<std::string>>& registered);

template <typename Registry>
std::vector<Group> plan(const Options& o, int world, Registry&& registry) {
  if (o.root >= world) {
    for (Coll c : o.colls) {
      if (is_rooted(c)) {
        throw UsageError("-r " + std::to_string(o.root) + ": the world has " + std::to_string(world) +
                         " ranks, so the root must be 0.." + std::to_string(world - 1));
      }
    }
  }
  std::vector<Group> groups;
  std::string lacking;
  for (Coll c : o.colls) {
    Collective dc{};
    std::vector<std::string> algos =
        plan_algos(o.algo, c, to_collective(c, &dc) ? registry(dc) : std::optional<std::vector<std::string>>{});
    if (algos.empty()) {
      lacking += std::string(lacking.empty() ? "" : ", ") + to_string(c);
      continue;
    }
    const std::vector<DType> dtypes =
        c == Coll::kBarrier ? std::vector<DType>{o.dtypes.front()} : o.dtypes;
    for (DType t : dtypes) {
      std::vector<Layout> layouts = plan_layouts(o, c, t, world);
      if (!is_reducing(c)) {
        groups.push_back({c, t, o.ops.front(), algos, layouts});
        continue;
      }
      for (ReduceOp op : o.ops) {
        if (op_fits_dtype(op, t)) groups.push_back({c, t, op, algos, layouts});
      }
    }
  }
  if (groups.empty() && !lacking.empty()) {
    throw UsageError("unknown algorithm '" + o.algo + "' for " + lacking + " (see --algo all, or use auto)");
  }
  return groups;
}

}  // namespace dcomm::bench
