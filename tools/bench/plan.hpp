#pragma once
// What a run measures: the options expanded, once the world size is known, into groups of cases
// (a collective, dtype and op) each with its algorithms and its sizes laid out for the world.

#include <algorithm>
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
/// The algorithm list of one collective for --algo, a comma-separated list of names, `auto` and `all` (see plan()),
/// in the order given without repeats; a name not registered for this collective is left out (a list may name
/// algorithms of several collectives). Empty: nothing in the list applies to this collective.
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
  std::vector<std::string> unused = split_algos(o.algo);  // names no planned collective has registered
  std::string colls;
  for (Coll c : o.colls) {
    Collective dc{};
    const std::optional<std::vector<std::string>> registered =
        to_collective(c, &dc) ? registry(dc) : std::optional<std::vector<std::string>>{};
    std::vector<std::string> algos = plan_algos(o.algo, c, registered);
    if (c != Coll::kSendRecv) {  // sendrecv takes any --algo: there is nothing to choose
      colls += std::string(colls.empty() ? "" : ", ") + to_string(c);
    }
    std::erase_if(unused, [&](const std::string& a) {
      return a == "auto" || a == "all" || std::find(algos.begin(), algos.end(), a) != algos.end();
    });
    if (algos.empty()) continue;
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
  // A typo in a list must not pass silently as "registered for none of these collectives".
  if (!unused.empty() && !colls.empty()) {
    throw UsageError("unknown algorithm '" + unused.front() + "' for " + colls + " (see --algo all, or use auto)");
  }
  return groups;
}

}  // namespace dcomm::bench
