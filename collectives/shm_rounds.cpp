// Reduction through shared-memory windows in rounds (see shm_rounds.hpp).
#include "collectives/shm_rounds.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <dcomm/error.hpp>
#include <cstring>
#include <exception>
#include <functional>
#include <vector>

#include "collectives/call_check.hpp"
#include "collectives/dissemination.hpp"
#include "collectives/layout.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/slots.hpp"
#include "collectives/stream_copy.hpp"
#include "collectives/window_probe.hpp"
#include "common/log.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kMinCapacity = std::size_t{64} << 10;
constexpr std::size_t kStreamBytes = kStreamFromBytes;
// The piece a slice is reduced in: its running sum stays in a core's L2 until it is copied out.
constexpr std::size_t kPieceBytes = std::size_t{256} << 10;

struct Windows final : AlgorithmState {
  std::unique_ptr<ShmWindows> win;
  std::size_t capacity = 0;  // bytes per half
  uint64_t calls = 0;
  bool unavailable = false;  // a rank could not create its window: the caller's fallback from now on
};

// On a group with slots whose call was checked in them (c.call null), a slot exchange: a cache line each way
// instead of a dissemination round of messages through the transport's rings (1-1.5 us a round on 2 ranks).
void barrier(const Context& c, uint32_t step) {
  if (c.view.slots != nullptr && c.call == nullptr) {
    c.view.slots->exchange(c, nullptr, {}, nullptr, 0);
    return;
  }
  agree(c, step, uint8_t{0}, [](uint8_t&, uint8_t) {});
}

// Collective: (re)creates the windows for at least `bytes` per half. Uses 2⌈log₂P⌉ steps from `step`. Returns
// false on every rank when any rank could not create its window.
bool grow(Context& c, Windows& w, std::size_t bytes, std::size_t round_bytes, uint32_t step) {
  w.win.reset();
  std::size_t capacity = std::min(std::max({bytes, kMinCapacity, w.capacity * 2}), round_bytes);
  w.win = open_windows(c, 2 * capacity, step, "another algorithm");
  if (!w.win) return false;
  w.capacity = capacity;
  w.calls = 0;
  return true;
}

// Step 2 of a round: slice `mine` (offsets within the round), reduced in rank order piece by piece into this
// rank's window (where the others will copy it from) and copied on into the output (when this rank has one) while
// still in cache.
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
    if (output == nullptr) continue;
    if (stream) {
      stream_copy(c.at(output, at), acc, len * c.esize());
    } else {
      c.copy(c.at(output, at), acc, len);
    }
  }
}

// A round's copies: out of the others' windows (`a`) and into this rank's (`b`, the next round's). With plain
// window stores (`interleave`) they run interleaved in pieces of kInterleaveBytes, so that the reads of the input
// from memory overlap the writes of the output to it: all_reduce 64 MiB on 2 ranks 9.4-9.6 against 10.2-10.9 ms,
// and 12.6-12.8 against 13.1 in a slower minute (alternating runs, session 7). With non-temporal ones it measured
// 0.9-1.2x the time: one after the other there.
struct Copy {
  char* to;
  const char* from;
  std::size_t bytes;
  bool streamed;
};

void run_round_copies(const std::vector<Copy>& a, const std::vector<Copy>& b, bool interleave) {
  constexpr std::size_t kInterleaveBytes = std::size_t{64} << 10;
  std::size_t ia = 0, ib = 0, oa = 0, ob = 0;
  auto step_one = [&](const std::vector<Copy>& v, std::size_t& i, std::size_t& o) {
    if (i >= v.size()) return;
    const Copy& x = v[i];
    const std::size_t len = std::min(kInterleaveBytes, x.bytes - o);
    if (x.streamed) {
      stream_copy(x.to + o, x.from + o, len);
    } else {
      std::memcpy(x.to + o, x.from + o, len);
    }
    o += len;
    if (o == x.bytes) ++i, o = 0;
  };
  if (!interleave) {
    while (ia < a.size()) step_one(a, ia, oa);
    while (ib < b.size()) step_one(b, ib, ob);
    return;
  }
  while (ia < a.size() || ib < b.size()) {
    step_one(a, ia, oa);
    step_one(b, ib, ob);
  }
}

// A call's rounds of copies, timed where plain stores fill the windows and the engine listens: the whole call's
// copies are judged at its end (note_window_round), since single rounds of a large call vary by 4x either way.
class RoundCopies {
 public:
  RoundCopies(const Context& c, bool cached) : c_(c), cached_(cached), timed_(cached && c.windows != nullptr) {}
  ~RoundCopies() {
    if (timed_ && copied_ > 0 && std::uncaught_exceptions() == 0) note_window_round(c_, copied_, seconds_);
  }
  void run(const std::vector<Copy>& a, const std::vector<Copy>& b) {
    if (!timed_) return run_round_copies(a, b, cached_);
    const auto t0 = std::chrono::steady_clock::now();
    run_round_copies(a, b, cached_);
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const Copy& x : a) copied_ += x.bytes;
    for (const Copy& x : b) copied_ += x.bytes;
  }

 private:
  const Context& c_;
  const bool cached_;
  const bool timed_;
  std::size_t copied_ = 0;
  double seconds_ = 0;
};

}  // namespace

bool shm_rounds_reduce(Context& c, int root) {
  const int p = c.size();
  const std::size_t n = c.work_count;
  const auto lg = static_cast<uint32_t>(pattern::ceil_log2(p));
  if (!*c.state) *c.state = std::make_unique<Windows>();
  auto& w = static_cast<Windows&>(**c.state);
  // Plain stores fill the windows where the group's probe found them faster (the engine measures again as calls
  // go by, and every rank takes a new answer at the same call): rounds that stay in the caches.
  const bool cached = cached_windows(c);
  const std::size_t round_limit = cached ? kShmCachedRoundBytes : kShmRoundBytes;
  const std::size_t round_elems = std::max<std::size_t>(1, round_limit / c.esize());
  const std::size_t round_bytes = std::min(n, round_elems) * c.esize();
  const bool grows = !w.unavailable && round_bytes > w.capacity;
  // The call check (c.call) is a dissemination, so it can be the first barrier. Where the windows must be set up
  // first, or are unavailable, it runs before anything else, so that a mismatched call never reaches the setup.
  const bool check_first = c.call != nullptr && (grows || w.unavailable);
  if (check_first) check_calls_match(c, c.call);
  if (grows) w.unavailable = !grow(c, w, round_bytes, round_limit, 0);
  if (w.unavailable) return false;
  const bool receives = root < 0 || root == c.rank();

  // An output larger than the cache is written around it: no read-for-ownership of its lines.
  const bool stream = n * c.esize() >= kStreamBytes;
  // A round's copies: into this rank's window (the others' parts of its input) and out of the others' windows
  // (their slices of the result). The copies out of round k and the copies in of round k + 1 go into the other
  // half, which every rank finished reading in round k - 1, before the first barrier of round k: with plain window
  // stores they run interleaved (run_round_copies).
  const uint64_t first_round = w.calls;
  auto round_at = [&](std::size_t k) {
    struct Round {
      std::size_t start, len, half;
      std::vector<pattern::Block> slices;
    } rd;
    rd.start = k * round_elems;
    rd.len = std::min(round_elems, n - rd.start);
    rd.half = ((first_round + k) % 2) * w.capacity;
    rd.slices = pattern::even_blocks(rd.len, p);
    return rd;
  };
  auto copies_in = [&](const auto& rd, std::vector<Copy>& out) {
    const char* input = c.at(c.input, rd.start);
    for (int q = 0; q < p; ++q) {
      const pattern::Block& b = rd.slices[static_cast<std::size_t>(q)];
      if (q == c.rank() || b.count == 0) continue;
      // The others read these lines next: written around this core's cache where a line still dirty here crosses
      // to their cores slower than it comes from memory (2 GB/s against memcpy's 13-20 on the VM of session 5),
      // into it where the probe found the other way round (collectives/window_probe.hpp).
      out.push_back({c.at(w.win->of(c.rank()) + rd.half, b.offset), c.at(input, b.offset), b.count * c.esize(), !cached});
    }
  };
  auto copies_out = [&](const auto& rd, std::vector<Copy>& out) {
    if (!receives) return;
    char* output = c.at(c.work, rd.start);
    for (int q = 0; q < p; ++q) {
      const pattern::Block& b = rd.slices[static_cast<std::size_t>(q)];
      if (q == c.rank() || b.count == 0) continue;
      out.push_back({c.at(output, b.offset), c.at(w.win->of(q) + rd.half, b.offset), b.count * c.esize(), stream});
    }
  };
  const std::size_t rounds = (n + round_elems - 1) / round_elems;
  std::vector<Copy> outs, ins;
  auto next = round_at(0);  // each round's layout is worked out once: for its copies in, then for the round
  copies_in(next, ins);
  RoundCopies copies(c, cached);
  copies.run({}, ins);
  for (std::size_t k = 0; k < rounds; ++k) {
    const auto rd = std::move(next);
    // Consecutive rounds use different steps: a rank is never more than one round ahead of another.
    const uint32_t step = 2 * lg + ((first_round + k) % 2) * 2 * lg;
    std::function<char*(int)> window = [&](int q) { return w.win->of(q) + rd.half; };
    const char* input = c.at(c.input, rd.start);
    char* output = receives ? c.at(c.work, rd.start) : nullptr;
    const pattern::Block mine = rd.slices[static_cast<std::size_t>(c.rank())];
    stream_copy_fence();  // the copies in before the barrier that tells the others
    if (k == 0 && c.call != nullptr && !check_first) {
      check_calls_match(c, c.call);  // a mismatched call throws here, before anyone reads a window
    } else {
      barrier(c, step);
    }
    ++w.calls;  // only a round that got past the check moves on to the other half
    reduce_slice(c, window, input, output, mine, stream);
    barrier(c, step + lg);
    outs.clear();
    ins.clear();
    copies_out(rd, outs);
    if (k + 1 < rounds) {
      next = round_at(k + 1);
      copies_in(next, ins);
    }
    copies.run(outs, ins);
  }
  if (stream) stream_copy_fence();
  return true;
}

bool shm_rounds_blocks(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const bool a2a = a.coll == Collective::kAllToAll;
  const bool bcast = a.coll == Collective::kBroadcast;
  // A block: what rank r sends rank q (all_to_all: block q of its send buffer; all_gather: its one block) and
  // receives from it (block q of recv). broadcast: one block, the root's buffer, the others' one block each.
  const std::size_t bytes = a2a ? a.send.bytes() / static_cast<std::size_t>(p) : a.send.bytes();
  char* const out = static_cast<char*>(a.recv.data);
  auto block = [&](int q) { return bcast ? out : out + static_cast<std::size_t>(q) * bytes; };
  if (p > 1 && bytes > 0) {
    if (!*c.state) *c.state = std::make_unique<Windows>();
    auto& w = static_cast<Windows&>(**c.state);
    // A rank's window half holds round k's part of each block it sends (all_to_all: one per rank, in the lane of
    // the receiver's index, its own left empty; all_gather: its one block, every rank reads it; broadcast: the
    // root's alone). The parts the ranks write in a round together are as large as the reduction's rounds
    // (all_to_all on 2 ranks, plain stores: parts of 512 KiB measured 0.8-0.95x the time of parts of 256 KiB from
    // 1 to 64 MiB).
    const std::size_t lanes = a2a ? static_cast<std::size_t>(p) : 1;
    const std::size_t written = a2a ? static_cast<std::size_t>(p - 1) : 1;
    const std::size_t writers = bcast ? 1 : static_cast<std::size_t>(p);
    const bool cached = cached_windows(c);
    const std::size_t part_limit = (cached ? kShmCachedRoundBytes : kShmRoundBytes) / (writers * written);
    const std::size_t part = std::min(bytes, part_limit);
    if (!w.unavailable && lanes * part > w.capacity) w.unavailable = !grow(c, w, lanes * part, lanes * part_limit, 0);
    if (w.unavailable) return false;
    // all_gather in place: its block moved to its place first. all_to_all in place (send is recv): block q of recv
    // is overwritten in round k only after round k's part of send's block q went into the window.
    const char* mine = a2a || bcast ? static_cast<const char*>(a.send.data) : own_block_first(a, r);
    auto sent = [&](int q) { return a2a ? mine + static_cast<std::size_t>(q) * bytes : mine; };
    auto lane = [&](int q) { return a2a ? static_cast<std::size_t>(q) * part : 0; };
    const bool stream = a.recv.bytes() >= kStreamBytes;
    const auto lg = static_cast<uint32_t>(pattern::ceil_log2(p));
    const uint64_t first_round = w.calls;
    const std::size_t rounds = (bytes + part - 1) / part;
    auto half = [&](std::size_t k) { return ((first_round + k) % 2) * w.capacity; };
    // Round k's part of what this rank sends: into its window, and its own block into its place while in cache.
    auto copies_in = [&](std::size_t k, std::vector<Copy>& v) {
      const std::size_t at = k * part;
      const std::size_t len = std::min(part, bytes - at);
      char* window = w.win->of(r) + half(k);
      if (bcast) {
        if (r == a.root) v.push_back({window, mine + at, len, !cached});  // the root's buffer is its output
        return;
      }
      if (!a2a) v.push_back({window, mine + at, len, !cached});  // the one block every rank reads
      for (int q = 0; a2a && q < p; ++q) {
        if (q != r) v.push_back({window + lane(q), sent(q) + at, len, !cached});
      }
      if (sent(r) != block(r)) v.push_back({block(r) + at, sent(r) + at, len, stream});
    };
    // Round k's part of every other rank's block for this rank, from its window (from rank r + 1 on: the ranks
    // spread their reads); broadcast: the root's, on every other rank.
    auto copies_out = [&](std::size_t k, std::vector<Copy>& v) {
      const std::size_t at = k * part;
      const std::size_t len = std::min(part, bytes - at);
      if (bcast) {
        if (r != a.root) v.push_back({out + at, w.win->of(a.root) + half(k), len, stream});
        return;
      }
      for (int s = 1; s < p; ++s) {
        const int q = (r + s) % p;
        v.push_back({block(q) + at, w.win->of(q) + half(k) + lane(r), len, stream});
      }
    };
    std::vector<Copy> outs, ins;
    RoundCopies copies(c, cached);
    copies_in(0, ins);
    copies.run({}, ins);
    for (std::size_t k = 0; k < rounds; ++k) {
      stream_copy_fence();  // the copies in before the barrier that tells the others
      // Consecutive rounds use different steps: a rank is never more than one round ahead of another.
      barrier(c, 2 * lg + static_cast<uint32_t>((first_round + k) % 2) * lg);
      ++w.calls;
      outs.clear();
      ins.clear();
      copies_out(k, outs);
      if (k + 1 < rounds) copies_in(k + 1, ins);
      copies.run(outs, ins);
    }
    if (stream) stream_copy_fence();
    return true;
  }
  // One rank, or empty blocks: its own block alone (broadcast: nothing to move).
  if (bcast) return true;
  const char* mine = a2a ? static_cast<const char*>(a.send.data) + static_cast<std::size_t>(r) * bytes : own_block_first(a, r);
  if (mine != block(r) && bytes > 0) std::memmove(block(r), mine, bytes);
  return true;
}

}  // namespace dcomm::coll
