// all_reduce[butterfly]: recursive doubling, with non-powers of two folded in and out.
//   0. With rem = P - p2 (p2 the largest power of two <= P), ranks 2i and 2i+1 (i < rem) pair up: the even
//      rank sends its vector to the odd one, which combines them (even's data first) and takes part alone.
//   1. For d = 1, 2, ..., p2/2 each remaining rank swaps its whole vector with the rank d away (in virtual
//      ranks) and combines, the lower rank's data first on both sides, so both partners hold the same bits.
//   2. The odd rank of each pair sends the result back to its even partner.
// Cost: ⌈log₂P⌉(α + nβ + nγ), plus 2(α + nβ) + nγ when P is not a power of two (latency-optimal).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_reduce_butterfly(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  if (p == 1) return;
  const std::size_t n = c.work_count;
  const std::size_t bytes = n * c.esize();
  const pattern::Fold f = pattern::fold(r, p);
  Scratch tmp = c.scratch(n);
  // Combines the partner's data (in tmp) with ours so that the lower rank's data comes first.
  auto combine = [&](int peer) {
    if (r < peer) {
      c.reduce(c.work, tmp.data(), n);
    } else {
      c.reduce(tmp.data(), c.work, n);
      c.copy(c.work, tmp.data(), n);
    }
  };
  if (f.partner >= 0 && f.vrank < 0) {
    c.send(f.partner, 0, c.work, bytes);
  } else if (f.partner >= 0) {
    c.recv(f.partner, 0, tmp.data(), bytes);
    combine(f.partner);
  }
  if (f.vrank >= 0) {
    uint32_t step = 1;
    for (int v : pattern::doubling_partners(f.vrank, f.p2)) {
      int peer = pattern::fold_real_rank(v, p);
      c.sendrecv(peer, c.work, bytes, peer, tmp.data(), bytes, step++);
      combine(peer);
    }
  }
  const uint32_t last = 1 + static_cast<uint32_t>(pattern::ceil_log2(f.p2));
  if (f.partner >= 0 && f.vrank >= 0) c.send(f.partner, last, c.work, bytes);
  if (f.partner >= 0 && f.vrank < 0) c.recv(f.partner, last, c.work, bytes);
}

double cost_all_reduce_butterfly(const CostParams& p, double n, int size) {
  int p2 = pattern::floor_pow2(size);
  double t = log2_rounds(p2) * (p.alpha + n * p.beta + n * p.gamma);
  if (p2 != size) t += 2.0 * (p.alpha + n * p.beta) + n * p.gamma;
  return t;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "butterfly",
                         "recursive doubling, non-powers of two folded; latency-optimal", supports_any,
                         run_all_reduce_butterfly, cost_all_reduce_butterfly}};
}  // namespace

}  // namespace dcomm::coll
