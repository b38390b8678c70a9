// all_reduce[cma]: one node, single copies with cross-memory attach (collectives/cma_slices.hpp).
//   1. Every rank sends every other its buffers' addresses (the group's first call also agrees that every rank
//      may read every other's memory; where one may not, every rank runs ring instead, from then on).
//   2. Rank r reduces slice r of P straight from the other ranks' inputs, in cache-sized pieces, into its
//      output. Each rank tells every other it is done (or how it failed).
//   3. Rank r copies slice q from rank q's output, for every q != r, then tells every other it is done reading,
//      so that no rank returns (and lets its buffers go) while another still reads them.
// The engine does not copy the input into the output first (takes_input). Memory traffic per rank, n bytes:
// reads n (its slice of every input) + (P-1)/P·n (the others' slices), writes n; the pieces read from the others
// stay in cache: (3 - 1/P)·n in all, where shm_direct moves 4n + (5P-1)/P·n (8.5n at P=2) and is capped at
// 16 MiB. Priced as 3 rounds of P-1 small messages and (3 - 1/P)/4·nγ (γ stands for ~4 bytes of memory traffic
// per byte reduced: two read, one written, one allocated).
// Only for groups on one host, host memory, and where DCOMM_SHM_CMA is not 0.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/cma_slices.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_segments.hpp"

namespace dcomm::coll {

namespace {

constexpr uint32_t kExchangeStep = 0;  // and up to ⌈log₂P⌉ more on the first call
constexpr uint32_t kSliceDoneStep = 40;
constexpr uint32_t kFinishedStep = 41;
constexpr uint32_t kFallbackStep = 1000;

struct State final : AlgorithmState {
  CmaUse use = CmaUse::kUnknown;
};

void ring_instead(Context& c) {
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.work_count, c.size());
  ring_pass(c, c.work, blocks, 0, /*reduce=*/true, kFallbackStep);
  ring_pass(c, c.work, blocks, 0, /*reduce=*/false, kFallbackStep + 1);
}

}  // namespace

bool supports_cma(const Args& args, const GroupView& view) {
  // Not DCOMM_SHM_CMA: every rank must pick alike whatever its environment; the first call agrees on it.
  return args.send.device.is_host() && group_on_one_host(view);
}

void run_all_reduce_cma(Context& c) {
  const int p = c.size();
  if (p == 1) {
    if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
    return;
  }
  if (!*c.state) *c.state = std::make_unique<State>();
  auto& st = static_cast<State&>(**c.state);
  PeerBuffers b;
  if (!cma_exchange(c, st.use, b, kExchangeStep)) return ring_instead(c);
  const std::vector<pattern::Block> slices = pattern::even_blocks(c.work_count, p);
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  const std::vector<int> others = other_ranks(c);
  CmaStatus s = cma_reduce_slice(c, b, mine.offset, mine.count);
  cma_check(c, b, cma_signal(c, others, others, s, kSliceDoneStep));
  for (int q : others) {
    const pattern::Block& theirs = slices[static_cast<std::size_t>(q)];
    s = cma_fetch(c, b, q, theirs.offset, theirs.count);
    if (!s.ok()) break;
  }
  cma_check(c, b, cma_signal(c, others, others, s, kFinishedStep));
}

double cost_cma(const CostParams& p, double n, int size) {
  return 3.0 * (1.0 + 0.25 * (size - 2)) * p.alpha + 0.25 * (3.0 - 1.0 / size) * n * p.gamma;
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "cma",
                         "one node: each rank reduces its slice from the others' buffers with single copies "
                         "(process_vm_readv), then copies the others' slices",
                         supports_cma, run_all_reduce_cma, cost_cma, false, false, /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
