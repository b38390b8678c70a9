// all_reduce[one_to_all]: parameter-server style, for comparison.
//   1. Every rank sends its whole vector to rank 0, which combines them in rank order.
//   2. Rank 0 sends the result to every rank.
// Cost: 2(P-1)(α + nβ) + (P-1)nγ on a single-port root: its link carries 2(P-1)n bytes, so it loses to ring
// for any n > 0; it is here to show why.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_reduce_one_to_all(Context& c) {
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  if (c.size() == 1) return;
  if (c.rank() != 0) {
    c.send(0, 0, c.work, bytes);
    c.recv(0, 1, c.work, bytes);
    return;
  }
  Scratch tmp = c.scratch(n);
  for (int i = 1; i < c.size(); ++i) {
    c.recv(i, 0, tmp.data(), bytes);
    c.reduce(c.work, tmp.data(), n);
  }
  std::vector<transport::RequestPtr> sends;
  for (int i = 1; i < c.size(); ++i) sends.push_back(c.isend(i, 1, c.work, bytes));
  c.wait_all(sends);
}

double cost_all_reduce_one_to_all(const CostParams& p, double n, int size) {
  return 2.0 * (size - 1) * (p.alpha + n * p.beta) + (size - 1) * n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "one_to_all",
                         "everyone to rank 0, rank 0 back to everyone (parameter server)", supports_any,
                         run_all_reduce_one_to_all, cost_all_reduce_one_to_all}};
}  // namespace

}  // namespace dcomm::coll
