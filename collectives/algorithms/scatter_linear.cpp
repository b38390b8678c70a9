// scatter[linear]: the root sends rank i its block directly (scatter and scatterv alike), then copies its own.
// Cost: (P-1)α + (P-1)/P·nβ (the root's link carries every block).

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/layout.hpp"

namespace dcomm::coll {

void run_scatter_linear(Context& c) {
  const Args& a = c.args;
  if (c.rank() != a.root) {
    if (a.recv.count > 0) c.recv(a.root, 0, a.recv.data, a.recv.count * c.esize());
    return;
  }
  std::vector<pattern::Block> blocks = scatter_blocks(a, c.size());
  std::vector<transport::RequestPtr> sends;
  for (int i = 0; i < c.size(); ++i) {
    const pattern::Block& b = blocks[static_cast<std::size_t>(i)];
    if (i != a.root && b.count > 0) sends.push_back(c.isend(i, 0, c.at(a.send.data, b.offset), b.count * c.esize()));
  }
  // The root's own block: while the others read theirs (each receiver copies its block out of the root's memory,
  // cross-memory attach, or from the ring), unless its receive buffer overlaps the send buffer (in place), where it
  // may overlap blocks still to go out: then last.
  const char* own = c.at(a.send.data, blocks[static_cast<std::size_t>(a.root)].offset);
  const bool apart = disjoint(a.recv.data, a.recv.bytes(), a.send.data, a.send.bytes());
  if (apart) c.copy(a.recv.data, own, a.recv.count);
  c.wait_all(sends);
  if (!apart) c.copy(a.recv.data, own, a.recv.count);
}

double cost_scatter_linear(const CostParams& p, double n, int size) {
  return (size - 1) * p.alpha + fraction(size) * n * p.beta;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kScatter, "linear", "the root sends each rank its block (scatter and scatterv)",
                         supports_any, run_scatter_linear, cost_scatter_linear}};
}  // namespace

}  // namespace dcomm::coll
