// reduce[cma]: one node, single copies with cross-memory attach (collectives/cma_slices.hpp).
//   1. Every rank sends every other its buffers' addresses (the group's first call also agrees that every rank
//      may read every other's memory; where one may not, every rank runs binomial instead, from then on).
//   2. Every rank r reduces slice r of P straight from the other ranks' inputs, in cache-sized pieces, into its
//      work buffer (the root's output; the engine's scratch elsewhere), and tells the root (or how it failed).
//   3. The root copies slice q from rank q's work buffer for every q != root, then tells every rank it is done
//      (with the first failure it heard of), so that no rank frees its buffers while the root still reads them.
// The engine does not copy the input first (takes_input). Memory traffic: every rank reads n/P of every input
// and writes its slice; the root also copies (P-1)/P·n: at P=2 the root moves 2.5n where binomial moves 6n
// (the engine's copy, the received copy, the reduction) and the other rank n.
// Only for groups on one host, host memory, and where DCOMM_SHM_CMA is not 0.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_slices.hpp"
#include "collectives/primitives.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kExchangeStep = 0;  // and up to ⌈log₂P⌉ more on the first call
constexpr uint32_t kSliceDoneStep = 40;
constexpr uint32_t kFinishedStep = 41;
constexpr uint32_t kFallbackStep = 1000;

struct State final : AlgorithmState {
  CmaUse use = CmaUse::kUnknown;
};

}  // namespace

void run_reduce_cma(Context& c) {
  const int p = c.size();
  const int root = c.args.root;
  if (p > 1 && !*c.state) *c.state = std::make_unique<State>();
  PeerBuffers b;
  if (p == 1 || !cma_exchange(c, static_cast<State&>(**c.state).use, b, kExchangeStep)) {
    if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
    if (p > 1) binomial_reduce(c, c.work, c.work_count, root, kFallbackStep);
    return;
  }
  const std::vector<pattern::Block> slices = pattern::even_blocks(c.work_count, p);
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  CmaStatus s = cma_reduce_slice(c, b, mine.offset, mine.count);
  if (c.rank() != root) {
    cma_check(c, b, cma_signal(c, {root}, {}, s, kSliceDoneStep));
    cma_check(c, b, cma_signal(c, {}, {root}, {}, kFinishedStep));
    return;
  }
  const std::vector<int> others = other_ranks(c);
  s = cma_signal(c, {}, others, s, kSliceDoneStep);
  for (int q : others) {
    if (!s.ok()) break;
    const pattern::Block& theirs = slices[static_cast<std::size_t>(q)];
    s = cma_fetch(c, b, q, theirs.offset, theirs.count);
  }
  // Sent to every rank whatever happened, so that none waits for a root that gave up.
  std::vector<transport::RequestPtr> sends;
  for (int q : others) sends.push_back(c.isend(q, kFinishedStep, &s, sizeof(s)));
  c.wait_all(sends);
  cma_check(c, b, s);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main(). Priced like
// all_reduce[cma]: the root's share is the same reads and copies.
const Registration kRow{{Collective::kReduce, "cma",
                         "one node: each rank reduces its slice from the others' buffers with single copies "
                         "(process_vm_readv), the root copies the slices",
                         supports_cma, run_reduce_cma, cost_cma, false, false, /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
