// The table, made of the rows the algorithm files register; see docs/adding-an-algorithm.md.

#include "collectives/registry.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/patterns.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

bool supports_any(const Args& /*args*/, const GroupView& /*view*/) { return true; }
bool supports_regular(const Args& args, const GroupView& /*view*/) { return !args.vector_variant; }
bool supports_hier(const Args& args, const GroupView& view) { return !args.vector_variant && spans_nodes(view); }

std::vector<int> node_representatives(const Hierarchy& h, int root) {
  std::vector<int> reps;
  const int root_node = h.topo.node_of[static_cast<std::size_t>(root)];
  for (int n = 0; n < h.topo.node_count(); ++n) reps.push_back(n == root_node ? root : h.topo.leader(n));
  return reps;
}

const GroupView& across_view(const GroupView& group, const Hierarchy& h, const std::vector<int>& reps, int root_node,
                             GroupView& own) {
  if (reps[static_cast<std::size_t>(root_node)] == h.topo.leader(root_node)) return h.leaders;
  own = sub_view(group, reps);
  return own;
}

double log2_rounds(int size) { return pattern::ceil_log2(size); }
double fraction(int size) { return size > 0 ? static_cast<double>(size - 1) / size : 0.0; }
double call_check_cost(const CostParams& p, int size) {
  return p.check_calls && size > 1 ? log2_rounds(size) * (p.alpha + 100 * p.beta) : 0.0;
}

namespace {

// The rows as registered, in registration order: before main(), in link order, which for libdcomm's link_whole of
// the collectives library is the order of collectives/algorithms/meson.build.
std::vector<Algorithm>& registered_rows() {
  static std::vector<Algorithm> rows;
  return rows;
}

}  // namespace

Registration::Registration(const Algorithm& row) { registered_rows().push_back(row); }

const std::vector<Algorithm>& algorithm_table() {
  // Built on first use, which is after every file's registration (none runs before main()). Grouped by
  // collective; within one, the registration order stays (it breaks the cost model's ties).
  static const std::vector<Algorithm> kTable = [] {
    std::vector<Algorithm> rows = registered_rows();
    std::stable_sort(rows.begin(), rows.end(), [](const Algorithm& x, const Algorithm& y) {
      return static_cast<int>(x.collective) < static_cast<int>(y.collective);
    });
    return rows;
  }();
  return kTable;
}

const std::vector<const Algorithm*>& algorithms_for(Collective c) {
  static const auto kByCollective = [] {
    std::map<Collective, std::vector<const Algorithm*>> by;
    for (const Algorithm& a : algorithm_table()) by[a.collective].push_back(&a);
    return by;
  }();
  static const std::vector<const Algorithm*> kNone;
  auto it = kByCollective.find(c);
  return it == kByCollective.end() ? kNone : it->second;
}

std::size_t algorithm_index(const Algorithm& a) { return static_cast<std::size_t>(&a - algorithm_table().data()); }

const Algorithm* find_algorithm(Collective c, const std::string& name) {
  for (const Algorithm* a : algorithms_for(c)) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string algorithm_names(Collective c) {
  std::string out;
  for (const Algorithm* a : algorithms_for(c)) out += (out.empty() ? "" : ", ") + std::string(a->name);
  return out;
}

}  // namespace dcomm::coll

namespace dcomm {

std::vector<std::string> algorithms(Collective c) {
  std::vector<std::string> out;
  for (const coll::Algorithm* a : coll::algorithms_for(c)) out.emplace_back(a->name);
  return out;
}

}  // namespace dcomm
