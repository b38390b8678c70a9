// all_reduce[shm_direct]: one node, straight through shared memory, no messages for the data.
//   1. Each rank creates a shared-memory segment of n bytes and copies its input into it.
//   2. Barrier (dissemination over the mesh). Each rank maps every other rank's segment.
//   3. Rank r reduces slice r (of P nearly equal slices) straight from every segment, in rank order, and writes
//      the result into its output and back into slice r of its own segment.
//   4. Barrier. Each rank copies slice q from rank q's segment, for every q != r, and unlinks its own segment
//      (every rank has mapped it by now; the memory lives on until the last mapping goes).
//   Each slice is reduced by one rank only, so every rank holds identical bits.
// Cost: 2⌈log₂P⌉α + P·σ + (1 + 2(P-1)/P)·nγ + 2n·π, where σ is the setup of one segment mapping and π the cost
// per byte of populating fresh pages: constants (kSegmentSetup, kPageCost), since the probe measures neither.
// Only for groups whose ranks all share one host, on host memory.

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/shm_segments.hpp"

namespace dcomm::coll {

namespace {

constexpr double kSegmentSetup = 10e-6;  // shm_open + ftruncate + mmap + munmap, per segment
constexpr double kPageCost = 0.1e-9;     // per byte: a page fault or PTE population per 4 KiB

void barrier(const Context& c, uint32_t step) {
  std::vector<uint8_t> token(1, 0);
  dissemination_merge(c, step, token, [](std::vector<uint8_t>&, const std::vector<uint8_t>&) {});
}

}  // namespace

bool supports_all_reduce_shm_direct(const Args& args, const GroupView& view) {
  return args.send.device.is_host() && group_on_one_host(view);
}

void run_all_reduce_shm_direct(Context& c) {
  const int p = c.size();
  if (p == 1) return;
  const std::size_t n = c.work_count;
  ShmWindows win(c, n * c.esize());
  c.copy(win.mine(), c.work, n);
  const auto rounds = static_cast<uint32_t>(pattern::ceil_log2(p));
  barrier(c, 0);
  win.map_peers();
  std::vector<pattern::Block> slices = pattern::even_blocks(n, p);
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  if (mine.count > 0) {
    char* out = c.at(c.work, mine.offset);
    c.copy(out, c.at(win.of(0), mine.offset), mine.count);
    for (int q = 1; q < p; ++q) c.reduce(out, c.at(win.of(q), mine.offset), mine.count);
    c.copy(c.at(win.mine(), mine.offset), out, mine.count);
  }
  barrier(c, rounds);
  win.unlink_mine();
  for (int q = 0; q < p; ++q) {
    const pattern::Block& s = slices[static_cast<std::size_t>(q)];
    if (q != c.rank()) c.copy(c.at(c.work, s.offset), c.at(win.of(q), s.offset), s.count);
  }
}

double cost_all_reduce_shm_direct(const CostParams& p, double n, int size) {
  return 2.0 * log2_rounds(size) * p.alpha + size * kSegmentSetup + (1.0 + 2.0 * fraction(size)) * n * p.gamma +
         2.0 * n * kPageCost;
}

}  // namespace dcomm::coll
