// all_reduce[shm_direct]: one node, straight through shared memory; messages only for two barriers.
//   Setup (the first call, and any call larger than the windows so far; every rank sees the same sizes): each
//   rank creates a shared-memory segment with two halves of the capacity, the ranks agree that all succeeded,
//   map each other's segments and unlink the names. The windows stay mapped while the group lives.
//   Per call, in the half (call parity) not used by the previous call:
//   1. Each rank copies its input into its own window. Barrier (dissemination over the mesh; with the call check
//      on, the check's own rounds, so the call pays no separate check).
//   2. Rank r reduces slice r (of P nearly equal slices) straight from every rank's window, in rank order, into
//      its output and back into slice r of its own window. Barrier.
//   3. Each rank copies slice q from rank q's window, for every q != r.
//   Alternating halves is what makes a third barrier unnecessary: a rank writes a half again only two calls
//   later, after every rank has passed the first barrier of the call in between (so finished reading it).
//   Each slice is reduced by one rank only, so every rank holds identical bits.
// Cost: 2⌈log₂P⌉α + (1 + 2(P-1)/P)·nγ (memory copies priced like reduction; no link β): the setup is paid once;
// plus the check's ⌈log₂P⌉(α + 100β), which it no longer sends but keeps in its price (see the cost function).
// Only for groups on one host, host memory, and n <= 16 MiB (the windows take 2n per rank in /dev/shm). When a
// rank cannot create its window (a small /dev/shm), every rank logs why and runs ring instead, from then on.

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_check.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_segments.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
constexpr std::size_t kMinCapacity = std::size_t{64} << 10;

constexpr uint32_t kFallbackStep = 1000;  // above every step the shared-memory path uses

struct Windows final : AlgorithmState {
  std::unique_ptr<ShmWindows> win;
  std::size_t capacity = 0;  // bytes per half
  uint64_t calls = 0;
  bool unavailable = false;  // a rank could not create its window: ring from now on
};

void barrier(const Context& c, uint32_t step) {
  agree(c, step, uint8_t{0}, [](uint8_t&, uint8_t) {});
}

// Collective: (re)creates the windows for at least `bytes` per half. Uses 2⌈log₂P⌉ steps from `step`. Returns
// false on every rank when any rank could not create its window.
bool grow(Context& c, Windows& w, std::size_t bytes, uint32_t step) {
  w.win.reset();
  std::size_t capacity = std::max({bytes, kMinCapacity, w.capacity * 2});
  std::string why;
  try {
    w.win = std::make_unique<ShmWindows>(c, 2 * capacity);
  } catch (const Error& e) {
    why = e.what();
  }
  // Agree on the lowest rank that failed, so that every rank changes course alike.
  int32_t failed =
      agree(c, step, why.empty() ? INT32_MAX : c.rank(), [](int32_t& m, int32_t t) { m = std::min(m, t); });
  if (failed != INT32_MAX) {
    w.win.reset();
    if (!why.empty()) DCOMM_WARN("{}; all_reduce falls back to ring on this group", why);
    if (c.rank() == 0) DCOMM_WARN("{}: rank {} could not create its shared-memory window: using ring", c.what, failed);
    return false;
  }
  w.win->map_peers(c);
  barrier(c, step + static_cast<uint32_t>(pattern::ceil_log2(c.size())));
  w.win->unlink_mine();
  w.capacity = capacity;
  w.calls = 0;
  return true;
}

void ring_instead(Context& c) {
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.work_count, c.size());
  ring_pass(c, c.work, blocks, 0, /*reduce=*/true, kFallbackStep);
  ring_pass(c, c.work, blocks, 0, /*reduce=*/false, kFallbackStep + 1);
}

}  // namespace

bool supports_all_reduce_shm_direct(const Args& args, const GroupView& view) {
  return args.send.device.is_host() && args.send.bytes() <= kMaxBytes && group_on_one_host(view);
}

void run_all_reduce_shm_direct(Context& c) {
  const int p = c.size();
  if (p == 1) return;
  const std::size_t n = c.work_count;
  const auto rounds = static_cast<uint32_t>(pattern::ceil_log2(p));
  if (!*c.state) *c.state = std::make_unique<Windows>();
  auto& w = static_cast<Windows&>(**c.state);
  const bool grows = !w.unavailable && n * c.esize() > w.capacity;
  // The call check (c.call) is a dissemination, so it can be the first barrier. Where the windows must be set up
  // first, or are unavailable, it runs before anything else, so that a mismatched call never reaches the setup.
  const bool check_first = c.call != nullptr && (grows || w.unavailable);
  if (check_first) check_calls_match(c, c.call);
  if (grows) w.unavailable = !grow(c, w, n * c.esize(), 0);
  if (w.unavailable) return ring_instead(c);
  const std::size_t half = (w.calls % 2) * w.capacity;
  auto window = [&](int q) { return w.win->of(q) + half; };

  c.copy(window(c.rank()), c.work, n);
  if (c.call != nullptr && !check_first) {
    check_calls_match(c, c.call);  // a mismatched call throws here, before anyone reads a window
  } else {
    barrier(c, 2 * rounds);
  }
  ++w.calls;  // only a call that got past the check moves on to the other half
  std::vector<pattern::Block> slices = pattern::even_blocks(n, p);
  const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
  if (mine.count > 0) {
    char* out = c.at(c.work, mine.offset);
    c.copy(out, c.at(window(0), mine.offset), mine.count);
    for (int q = 1; q < p; ++q) c.reduce(out, c.at(window(q), mine.offset), mine.count);
    c.copy(c.at(window(c.rank()), mine.offset), out, mine.count);
  }
  barrier(c, 3 * rounds);
  for (int q = 0; q < p; ++q) {
    const pattern::Block& s = slices[static_cast<std::size_t>(q)];
    if (q != c.rank()) c.copy(c.at(c.work, s.offset), c.at(window(q), s.offset), s.count);
  }
}

double cost_all_reduce_shm_direct(const CostParams& p, double n, int size) {
  // Still priced with the separate check although the check is its first barrier: the formula has no term for
  // reading the other ranks' windows, and without the check's share it undercuts all_reduce[bruck] on small
  // calls that bruck serves faster (2 ranks, 2 KiB: 1.25 against 0.96 us; 3 ranks on 2 cores, 64 B to 2 KiB:
  // 13.5 against 7 us).
  return 2.0 * log2_rounds(size) * p.alpha + (1.0 + 2.0 * fraction(size)) * n * p.gamma + call_check_cost(p, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "shm_direct",
                         "one node: each rank reduces its slice straight from the others' shared memory",
                         supports_all_reduce_shm_direct, run_all_reduce_shm_direct, cost_all_reduce_shm_direct, true}};
}  // namespace

}  // namespace dcomm::coll
