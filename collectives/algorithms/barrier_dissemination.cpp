// barrier[dissemination]: in round k = 0..⌈log₂P⌉-1 rank r sends a token to r + 2^k and waits for one from
// r - 2^k. After the last round every rank has heard, directly or through others, from every rank.
// With the call check on, the check's own rounds (which carry the call descriptors) are the barrier.
// Cost: ⌈log₂P⌉α.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_check.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_barrier_dissemination(Context& c) {
  // The call check's rounds are these rounds: with the check on, they are the barrier.
  if (c.call != nullptr) return check_calls_match(c, c.call);
  const int p = c.size();
  char out = 1;
  char in = 0;
  for (int k = 0; k < pattern::ceil_log2(p); ++k) {
    c.sendrecv(pattern::dissemination_to(c.rank(), p, k), &out, 1, pattern::dissemination_from(c.rank(), p, k), &in, 1,
               static_cast<uint32_t>(k));
  }
}

double cost_barrier_dissemination(const CostParams& p, double /*bytes*/, int size) {
  return log2_rounds(size) * p.alpha;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kBarrier, "dissemination",
                         "log P rounds of tokens at doubling distances (the call check's own)", supports_any,
                         run_barrier_dissemination, cost_barrier_dissemination, true}};
}  // namespace

}  // namespace dcomm::coll
