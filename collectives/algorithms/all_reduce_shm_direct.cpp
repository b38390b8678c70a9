// all_reduce[shm_direct]: one node, straight through shared memory; messages only for two barriers.
//   Setup (the first call, and any call larger than the windows so far; every rank sees the same sizes): each
//   rank creates a shared-memory segment with two halves of the capacity, the ranks agree that all succeeded,
//   map each other's segments and unlink the names. The windows stay mapped while the group lives.
//   Per call, in the half (call parity) not used by the previous call:
//   1. Each rank copies its input into its own window. Barrier (dissemination over the mesh).
//   2. Rank r reduces slice r (of P nearly equal slices) straight from every rank's window, in rank order, into
//      its output and back into slice r of its own window. Barrier.
//   3. Each rank copies slice q from rank q's window, for every q != r.
//   Alternating halves is what makes a third barrier unnecessary: a rank writes a half again only two calls
//   later, after every rank has passed the first barrier of the call in between (so finished reading it).
//   Each slice is reduced by one rank only, so every rank holds identical bits.
// Cost: 2⌈log₂P⌉α + (1 + 2(P-1)/P)·nγ (memory copies priced like reduction; no link β): the setup is paid once.
// Only for groups on one host, host memory, and n <= 16 MiB (the windows take 2n per rank in /dev/shm).

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/shm_segments.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
constexpr std::size_t kMinCapacity = std::size_t{64} << 10;

struct Windows final : AlgorithmState {
  std::unique_ptr<ShmWindows> win;
  std::size_t capacity = 0;  // bytes per half
  uint64_t calls = 0;
};

void barrier(const Context& c, uint32_t step) {
  std::vector<uint8_t> token(1, 0);
  dissemination_merge(c, step, token, [](std::vector<uint8_t>&, const std::vector<uint8_t>&) {});
}

// Collective: (re)creates the windows for at least `bytes` per half. Uses 2⌈log₂P⌉ steps from `step`.
void grow(Context& c, Windows& w, std::size_t bytes, uint32_t step) {
  w.win.reset();
  std::size_t capacity = std::max({bytes, kMinCapacity, w.capacity * 2});
  std::exception_ptr failure;
  try {
    w.win = std::make_unique<ShmWindows>(c, 2 * capacity);
  } catch (const Error&) {
    failure = std::current_exception();
  }
  // Agree on the lowest rank that failed, so that every rank fails alike instead of waiting for it.
  int32_t failed = agree(c, step, failure ? c.rank() : INT32_MAX, [](int32_t& m, int32_t t) { m = std::min(m, t); });
  if (failure) std::rethrow_exception(failure);
  if (failed != INT32_MAX) {
    w.win.reset();
    throw Error(ErrorCode::kSystemError, fmt::format("{}: rank {} could not create its shared-memory window; see "
                                                     "its error",
                                                     c.what, failed));
  }
  w.win->map_peers(c);
  barrier(c, step + static_cast<uint32_t>(pattern::ceil_log2(c.size())));
  w.win->unlink_mine();
  w.capacity = capacity;
  w.calls = 0;
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
  if (n * c.esize() > w.capacity) grow(c, w, n * c.esize(), 0);
  const std::size_t half = (w.calls++ % 2) * w.capacity;
  auto window = [&](int q) { return w.win->of(q) + half; };

  c.copy(window(c.rank()), c.work, n);
  barrier(c, 2 * rounds);
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
  return 2.0 * log2_rounds(size) * p.alpha + (1.0 + 2.0 * fraction(size)) * n * p.gamma;
}

}  // namespace dcomm::coll
