// all_reduce[shm_direct]: one node, straight through shared memory; messages only for barriers.
//   Setup (the first call, and any call whose round is larger than the windows so far; every rank sees the same
//   sizes): each rank creates a shared-memory segment with two halves of the capacity (at most kRoundBytes each),
//   the ranks agree that all succeeded, map each other's segments and unlink the names. The windows stay mapped
//   while the group lives.
//   A call runs in rounds of at most kRoundBytes, each in the half (round parity) not used by the round before:
//   1. Each rank copies the parts of its input that the others reduce (slice q of P, for every q != r) into its
//      own window. Barrier (dissemination over the mesh; in the first round, with the call check on, the check's
//      own rounds, so the call pays no separate check).
//   2. Rank r reduces slice r in cache-sized pieces, in rank order, from its own input and the others' windows,
//      into slice r of its own window, and copies each piece on into its output. Barrier.
//   3. Each rank copies slice q from rank q's window into its output, for every q != r.
//   Alternating halves is what makes a third barrier unnecessary: a rank writes a half again only two rounds
//   later, after every rank has passed the first barrier of the round in between (so finished reading it).
//   Each slice is reduced by one rank only, so every rank holds identical bits. The engine does not copy the input
//   into the output first (takes_input), and no rank ever reads another's user buffer.
// Rounds keep the windows small enough to stay in the last-level cache while the others read them: past the
// first, the memory traffic per rank is its input read once and its output written once (2n), against 8.5n at
// P=2 when the whole call went through windows of its size (the engine's copy, in, the reduction, back, out), and
// /dev/shm holds 2·kRoundBytes per rank whatever the call's size. From 8 MiB the output is written with
// non-temporal stores, which saves reading each output line before writing it (n more bytes of traffic).
// Cost: 2⌈log₂P⌉α per round + (1 + 2(P-1)/P)·nγ (memory copies priced like reduction; no link β): the setup is
// paid once; plus the check's ⌈log₂P⌉(α + 100β), which it no longer sends but keeps in its price (see the cost
// function). Only for groups on one host and host memory. When a rank cannot create its window (a small
// /dev/shm), every rank logs why and runs ring instead, from then on.

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/call_check.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/primitives.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/stream_copy.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

// A round's share of the windows: small enough that both halves of every rank's window stay in the last-level
// cache (32 MiB on the machines measured) between being written and being read by the others.
constexpr std::size_t kRoundBytes = std::size_t{4} << 20;
constexpr std::size_t kMinCapacity = std::size_t{64} << 10;
// Calls from this size write their output with non-temporal stores (a quarter of the last-level cache measured:
// larger outputs would not be read back from it anyway).
constexpr std::size_t kStreamBytes = std::size_t{8} << 20;
// The piece a slice is reduced in: its running sum stays in a core's L2 until it is copied out.
constexpr std::size_t kPieceBytes = std::size_t{256} << 10;

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
  std::size_t capacity = std::min(std::max({bytes, kMinCapacity, w.capacity * 2}), kRoundBytes);
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
  if (c.input != c.work) c.copy(c.work, c.input, c.work_count);
  std::vector<pattern::Block> blocks = pattern::even_blocks(c.work_count, c.size());
  ring_pass(c, c.work, blocks, 0, /*reduce=*/true, kFallbackStep);
  ring_pass(c, c.work, blocks, 0, /*reduce=*/false, kFallbackStep + 1);
}

// Step 2 of a round: slice `mine` (offsets within the round), reduced in rank order piece by piece into this
// rank's window (where the others will copy it from) and copied on into the output while still in cache.
void reduce_slice(const Context& c, const std::function<char*(int)>& window, const char* input, char* output,
                  const pattern::Block& mine, bool stream) {
  const int p = c.size();
  const std::size_t piece = std::max<std::size_t>(1, std::min(c.chunk_elems(), kPieceBytes / c.esize()));
  for (std::size_t done = 0; done < mine.count; done += piece) {
    const std::size_t at = mine.offset + done;
    const std::size_t len = std::min(piece, mine.count - done);
    char* acc = c.at(window(c.rank()), at);
    auto src = [&](int q) { return q == c.rank() ? c.at(input, at) : c.at(window(q), at); };
    c.copy(acc, src(0), len);
    for (int q = 1; q < p; ++q) c.reduce(acc, src(q), len);
    // After the reads: the output may be this rank's input (in place).
    if (stream) {
      stream_copy(c.at(output, at), acc, len * c.esize());
    } else {
      c.copy(c.at(output, at), acc, len);
    }
  }
}

}  // namespace

bool supports_all_reduce_shm_direct(const Args& args, const GroupView& view) {
  return args.send.device.is_host() && group_on_one_host(view);
}

void run_all_reduce_shm_direct(Context& c) {
  const int p = c.size();
  const std::size_t n = c.work_count;
  if (p == 1) {
    if (c.input != c.work) c.copy(c.work, c.input, n);
    return;
  }
  const auto lg = static_cast<uint32_t>(pattern::ceil_log2(p));
  const std::size_t round_elems = std::max<std::size_t>(1, kRoundBytes / c.esize());
  if (!*c.state) *c.state = std::make_unique<Windows>();
  auto& w = static_cast<Windows&>(**c.state);
  const std::size_t round_bytes = std::min(n, round_elems) * c.esize();
  const bool grows = !w.unavailable && round_bytes > w.capacity;
  // The call check (c.call) is a dissemination, so it can be the first barrier. Where the windows must be set up
  // first, or are unavailable, it runs before anything else, so that a mismatched call never reaches the setup.
  const bool check_first = c.call != nullptr && (grows || w.unavailable);
  if (check_first) check_calls_match(c, c.call);
  if (grows) w.unavailable = !grow(c, w, round_bytes, 0);
  if (w.unavailable) return ring_instead(c);

  // An output larger than the cache is written around it: no read-for-ownership of its lines.
  const bool stream = n * c.esize() >= kStreamBytes;
  for (std::size_t start = 0; start < n; start += round_elems) {
    const std::size_t len = std::min(round_elems, n - start);
    const bool first = start == 0;
    // Consecutive rounds use different steps: a rank is never more than one round ahead of another.
    const uint32_t step = 2 * lg + (w.calls % 2) * 2 * lg;
    const std::size_t half = (w.calls % 2) * w.capacity;
    std::function<char*(int)> window = [&](int q) { return w.win->of(q) + half; };
    const char* input = c.at(c.input, start);
    char* output = c.at(c.work, start);
    const std::vector<pattern::Block> slices = pattern::even_blocks(len, p);
    const pattern::Block mine = slices[static_cast<std::size_t>(c.rank())];
    for (int q = 0; q < p; ++q) {
      const pattern::Block& s = slices[static_cast<std::size_t>(q)];
      if (q != c.rank()) c.copy(c.at(window(c.rank()), s.offset), c.at(input, s.offset), s.count);
    }
    if (first && c.call != nullptr && !check_first) {
      check_calls_match(c, c.call);  // a mismatched call throws here, before anyone reads a window
    } else {
      barrier(c, step);
    }
    ++w.calls;  // only a round that got past the check moves on to the other half
    reduce_slice(c, window, input, output, mine, stream);
    barrier(c, step + lg);
    for (int q = 0; q < p; ++q) {
      const pattern::Block& s = slices[static_cast<std::size_t>(q)];
      if (q == c.rank()) continue;
      if (stream) {
        stream_copy(c.at(output, s.offset), c.at(window(q), s.offset), s.count * c.esize());
      } else {
        c.copy(c.at(output, s.offset), c.at(window(q), s.offset), s.count);
      }
    }
  }
  if (stream) stream_copy_fence();
}

double cost_all_reduce_shm_direct(const CostParams& p, double n, int size) {
  // Still priced with the separate check although the check is its first barrier: the formula has no term for
  // reading the other ranks' windows, and without the check's share it undercuts all_reduce[bruck] on small
  // calls that bruck serves faster (2 ranks, 2 KiB: 1.25 against 0.96 us; 3 ranks on 2 cores, 64 B to 2 KiB:
  // 13.5 against 7 us).
  const double rounds = std::max(1.0, std::ceil(n / static_cast<double>(kRoundBytes)));
  return 2.0 * rounds * log2_rounds(size) * p.alpha + (1.0 + 2.0 * fraction(size)) * n * p.gamma +
         call_check_cost(p, size);
}

namespace {
// This algorithm's row of the table (collectives/registry.hpp), registered before main().
const Registration kRow{{Collective::kAllReduce, "shm_direct",
                         "one node: each rank reduces its slice straight from the others' shared memory",
                         supports_all_reduce_shm_direct, run_all_reduce_shm_direct, cost_all_reduce_shm_direct, true, false,
                         /*takes_input=*/true}};
}  // namespace

}  // namespace dcomm::coll
