// reduce[pipeline]: a pipelined chain toward the root in relative-rank order (v = (r - root) mod P).
//   The vector is cut into k = ⌈n / chunk⌉ pieces. Rank v = P-1 sends its pieces to v-1 at once; every other
//   rank receives piece i from v+1 into one of a few scratch slots, combines it into its own vector and forwards
//   the result to v-1 (the root, v = 0, keeps it). Up to kAhead receives are posted ahead, so piece i+1 can land
//   while piece i is combined, and rank v combines piece i+1 while rank v-1 combines piece i.
// Cost with k = ⌈n / chunk⌉ and s = n/k: (P + k - 2)(α + s(β + γ)): the first piece crosses P-1 stages, the other
//   k-1 follow one stage apart. A stage pays both β and γ because over shm the receiver itself copies each piece
//   (one process_vm_readv) before combining it: the overlap is between ranks, not inside one. On 2 ranks that is
//   binomial's work in k messages, so it never wins there; on P ranks it approaches n(β + γ) where binomial pays
//   ⌈log₂P⌉n(β + γ), given a core per rank. Measured on the 2-core development machine it did not win on 2 or 3
//   ranks, so its row is by_name_only (docs/algorithms.md).

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

namespace {

// Receives posted ahead: enough to keep the link busy while one piece is combined, few enough that the scratch
// stays kAhead pieces however long the vector.
constexpr std::size_t kAhead = 4;

}  // namespace

void run_reduce_pipeline(Context& c) {
  const int p = c.size();
  const std::size_t n = c.work_count;
  if (p == 1 || n == 0) return;
  const int v = pattern::mod(c.rank() - c.args.root, p);
  const int toward_root = v > 0 ? (c.rank() + p - 1) % p : -1;
  const int from_tail = v < p - 1 ? (c.rank() + 1) % p : -1;
  const std::size_t piece = std::min(c.chunk_elems(), n);
  const std::vector<pattern::Block> parts = pattern::pieces({0, n}, piece);
  auto bytes = [&](const pattern::Block& b) { return b.count * c.esize(); };

  std::vector<transport::RequestPtr> sends;
  if (from_tail < 0) {  // the far end of the chain has nothing to combine
    for (const pattern::Block& pc : parts) sends.push_back(c.isend(toward_root, 0, c.at(c.work, pc.offset), bytes(pc)));
    c.wait_all(sends);
    return;
  }
  const std::size_t slots = std::min(kAhead, parts.size());
  Scratch tmp = c.scratch(slots * piece);
  auto slot = [&](std::size_t i) { return c.at(tmp.data(), (i % slots) * piece); };
  std::vector<transport::RequestPtr> recvs(parts.size());
  for (std::size_t i = 0; i < slots; ++i) recvs[i] = c.irecv(from_tail, 0, slot(i), bytes(parts[i]));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const pattern::Block& pc = parts[i];
    c.wait(recvs[i]);
    c.reduce(c.at(c.work, pc.offset), slot(i), pc.count);
    // Slot i is free again: post the receive that reuses it before forwarding, so the link never idles.
    if (i + slots < parts.size()) recvs[i + slots] = c.irecv(from_tail, 0, slot(i), bytes(parts[i + slots]));
    if (toward_root >= 0) sends.push_back(c.isend(toward_root, 0, c.at(c.work, pc.offset), bytes(pc)));
  }
  c.wait_all(sends);
}

double cost_reduce_pipeline(const CostParams& p, double n, int size) {
  if (size <= 1) return 0;
  const double k = std::max(1.0, std::ceil(n / p.chunk_bytes));
  return (size + k - 2) * (p.alpha + n / k * (p.beta + p.gamma));
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kReduce, "pipeline",
                         "pipelined chain to the root; a piece's transfer overlaps the last one's reduction",
                         supports_any, run_reduce_pipeline, cost_reduce_pipeline, false, true}};
}  // namespace

}  // namespace dcomm::coll
