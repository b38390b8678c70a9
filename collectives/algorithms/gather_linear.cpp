// gather[linear]: every rank sends its block to the root, which receives each into place (gather and gatherv).
// Cost: (P-1)α + (P-1)/P·nβ.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"

namespace dcomm::coll {

void run_gather_linear(Context& c) {
  const Args& a = c.args;
  if (c.rank() != a.root) {
    if (a.send.count > 0) c.send(a.root, 0, a.send.data, a.send.count * c.esize());
    return;
  }
  std::vector<pattern::Block> blocks = gather_blocks(a, c.size());
  // First: in place, the root's data may sit where another rank's block is about to land.
  c.copy(c.at(a.recv.data, blocks[static_cast<std::size_t>(a.root)].offset), a.send.data, a.send.count);
  std::vector<transport::RequestPtr> recvs;
  for (int i = 0; i < c.size(); ++i) {
    const pattern::Block& b = blocks[static_cast<std::size_t>(i)];
    if (i != a.root && b.count > 0) recvs.push_back(c.irecv(i, 0, c.at(a.recv.data, b.offset), b.count * c.esize()));
  }
  c.wait_all(recvs);
}

double cost_gather_linear(const CostParams& p, double n, int size) {
  return (size - 1) * p.alpha + fraction(size) * n * p.beta;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kGather, "linear", "each rank sends its block to the root (gather and gatherv)",
                         supports_any, run_gather_linear, cost_gather_linear}};
}  // namespace

}  // namespace dcomm::coll
