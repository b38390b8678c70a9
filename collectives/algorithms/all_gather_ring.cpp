// all_gather[ring]: each rank puts its block at its place in `recv`; then in round s = 0..P-2 rank r sends
// block r-s to rank r+1 and receives block r-s-1 from rank r-1, forwarding chunk-sized pieces as they land.
// Cost: (P-1)α + (P-1)/P·nβ (n = the gathered bytes).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

void run_all_gather_ring(Context& c) {
  const Args& a = c.args;
  std::vector<pattern::Block> blocks = uniform_blocks(a.send.count, c.size());
  c.copy(c.at(a.recv.data, blocks[static_cast<std::size_t>(c.rank())].offset), a.send.data, a.send.count);
  // Its own block goes out from `send`, not from the copy just written (ring_pass: `first`) - unless `send` lies in
  // `recv` (in place: the input at the output's start), where blocks from the other ranks land while a peer may
  // still be reading it (a single copy reads when the receiver gets to it).
  const char* send = static_cast<const char*>(a.send.data);
  const char* recv = static_cast<const char*>(a.recv.data);
  const bool apart = send + a.send.bytes() <= recv || recv + a.recv.bytes() <= send;
  ring_pass(c, static_cast<char*>(a.recv.data), blocks, 0, /*reduce=*/false, 0, apart ? send : nullptr);
}

double cost_all_gather_ring(const CostParams& p, double n, int size) {
  return (size - 1) * p.alpha + fraction(size) * n * p.beta;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllGather, "ring", "ring, pipelined; bandwidth-optimal", supports_any,
                         run_all_gather_ring, cost_all_gather_ring}};
}  // namespace

}  // namespace dcomm::coll
