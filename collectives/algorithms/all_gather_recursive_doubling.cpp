// all_gather[recursive_doubling]: each rank puts its block in place; non-powers of two fold the first 2·rem
// ranks in pairs (the even rank hands its block to the odd one); then for d = 1, 2, ..., p2/2 every remaining
// rank swaps everything it has with the rank d away (virtual ranks), doubling its blocks each round; finally
// the odd rank of each pair sends the whole result to its even partner.
// Cost: ⌈log₂P⌉α + (P-1)/P·nβ, plus 2α + (1 + 1/P)nβ to fold a non-power of two.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_gather_recursive_doubling(Context& c) {
  const Args& a = c.args;
  std::vector<pattern::Block> blocks = uniform_blocks(a.send.count, c.size());
  c.copy(c.at(a.recv.data, blocks[static_cast<std::size_t>(c.rank())].offset), a.send.data, a.send.count);
  doubling_all_gather(c, static_cast<char*>(a.recv.data), blocks, /*fold_in=*/true, 0);
}

double cost_all_gather_recursive_doubling(const CostParams& p, double n, int size) {
  int p2 = pattern::floor_pow2(size);
  double t = log2_rounds(p2) * p.alpha + fraction(size) * n * p.beta;
  if (p2 != size) t += 2.0 * p.alpha + (1.0 + 1.0 / size) * n * p.beta;
  return t;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "recursive_doubling", "recursive doubling, non-powers of two folded",
                         supports_any, run_all_gather_recursive_doubling, cost_all_gather_recursive_doubling}};
}  // namespace

}  // namespace dcomm::coll
