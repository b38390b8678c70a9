// all_reduce[rabenseifner]: recursive-halving reduce-scatter, then recursive-doubling all-gather.
//   0. Non-powers of two fold as in butterfly: the even rank of each of the first rem pairs hands its vector to
//      the odd one, which then stands for both ranks' blocks.
//   1. Halving: in round k the p2 remaining ranks swap half of their current range with the rank p2/2^(k+1)
//      away and reduce the half they keep; after log₂p2 rounds each holds its own block(s), fully reduced.
//   2. Doubling: the same rounds backwards, swapping what each holds, until every rank has every block.
//   3. The odd rank of each pair sends the whole result to its even partner.
//   Each block is reduced on one rank only and copied to the others, so every rank holds identical bits.
// Cost: 2log₂P·α + 2(P-1)/P·nβ + (P-1)/P·nγ, plus 2(α + nβ) + nγ to fold a non-power of two.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_reduce_rabenseifner(Context& c) {
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.work_count, c.size());
  halving_reduce_scatter(c, c.work, blocks, /*unfold=*/false, 0);
  doubling_all_gather(c, c.work, blocks, /*fold_in=*/false, fold_steps(c.size()));
}

double cost_all_reduce_rabenseifner(const CostParams& p, double n, int size) {
  int p2 = pattern::floor_pow2(size);
  double t = 2.0 * log2_rounds(p2) * p.alpha + 2.0 * fraction(p2) * n * p.beta + fraction(p2) * n * p.gamma;
  if (p2 != size) t += 2.0 * (p.alpha + n * p.beta) + n * p.gamma;
  return t;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "rabenseifner",
                         "recursive halving reduce-scatter, recursive doubling all-gather", supports_any,
                         run_all_reduce_rabenseifner, cost_all_reduce_rabenseifner}};
}  // namespace

}  // namespace dcomm::coll
