// all_to_all[pairwise]: rank r copies its own block, then in round s = 1..P-1 sends its block for rank r+s and
// receives rank r-s's block for it; one exchange per round keeps every rank sending and receiving once per
// round. Handles all_to_all_v (per-rank counts and displacements); in place, `send` is copied aside first.
// Cost: (P-1)α + (P-1)/P·nβ (n = the bytes each rank sends in total).

#include <algorithm>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_to_all_pairwise(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  std::vector<pattern::Block> out = a2a_send_blocks(a, p);
  std::vector<pattern::Block> in = a2a_recv_blocks(a, p);
  const char* src = static_cast<const char*>(a.send.data);
  Scratch copy;
  if (a.send.data == a.recv.data && a.send.data != nullptr) {
    std::size_t extent = 0;
    for (const pattern::Block& b : out) extent = std::max(extent, b.end());
    copy = c.scratch(extent);
    c.copy(copy.data(), a.send.data, extent);
    src = copy.data();
  }
  auto mine = [](const std::vector<pattern::Block>& v, int i) { return v[static_cast<std::size_t>(i)]; };
  c.copy(c.at(a.recv.data, mine(in, r).offset), c.at(src, mine(out, r).offset),
         std::min(mine(in, r).count, mine(out, r).count));
  for (int s = 1; s < p; ++s) {
    int to = (r + s) % p;
    int from = pattern::mod(r - s, p);
    transport::RequestPtr rr, sr;
    if (mine(in, from).count > 0)
      rr = c.irecv(from, 0, c.at(a.recv.data, mine(in, from).offset), mine(in, from).count * c.esize());
    if (mine(out, to).count > 0) sr = c.isend(to, 0, c.at(src, mine(out, to).offset), mine(out, to).count * c.esize());
    if (rr) c.wait(rr);
    if (sr) c.wait(sr);
  }
}

double cost_all_to_all_pairwise(const CostParams& p, double n, int size) {
  return (size - 1) * p.alpha + fraction(size) * n * p.beta;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllToAll, "pairwise",
                         "P-1 rounds of pairwise exchange (all_to_all and all_to_all_v)", supports_any,
                         run_all_to_all_pairwise, cost_all_to_all_pairwise}};
}  // namespace

}  // namespace dcomm::coll
