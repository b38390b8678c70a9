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
  RoundCopies(const Context& c, bool cached)
      : c_(c), cached_(cached), timed_(cached && c.windows != nullptr && cached_large_windows(c)) {}
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

// The rounds of shm_rounds_blocks and shm_rounds_reduce_scatter, one barrier each: round 0's copies into this
// rank's window half, then per round k the fence and barrier that tell the others (steps alternating with k's
// parity: a rank is never more than one round ahead of another), `work(k)` (reductions out of the others'
// windows), and round k's copies out interleaved with round k + 1's copies in. A rank writes a half again two
// rounds later, after every rank has passed the barrier of the round in between, so finished reading it. The
// callers lay out round k in half ((w.calls at the call) + k) % 2.
template <typename CopiesIn, typename CopiesOut, typename Work>
void run_rounds(Context& c, Windows& w, std::size_t rounds, bool cached, const CopiesIn& copies_in,
                const CopiesOut& copies_out, const Work& work) {
  const auto lg = static_cast<uint32_t>(pattern::ceil_log2(c.size()));
  const uint64_t first_round = w.calls;
  std::vector<Copy> outs, ins;
  RoundCopies copies(c, cached);
  copies_in(0, ins);
  copies.run({}, ins);
  for (std::size_t k = 0; k < rounds; ++k) {
    stream_copy_fence();  // the copies in before the barrier that tells the others
    barrier(c, 2 * lg + static_cast<uint32_t>((first_round + k) % 2) * lg);
    ++w.calls;
    work(k);
    outs.clear();
    ins.clear();
    copies_out(k, outs);
    if (k + 1 < rounds) copies_in(k + 1, ins);
    copies.run(outs, ins);
  }
}

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

bool shm_rounds_reduce_scatter(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  const std::size_t count = c.args.recv.count;  // elements a block
  const std::size_t es = c.esize();
  auto block_at = [&](const char* base, int q, std::size_t i) { return c.at(base, static_cast<std::size_t>(q) * count + i); };
  char* const mine = c.at(c.work, static_cast<std::size_t>(r) * count);
  if (p == 1 || count == 0) {
    if (c.input != c.work && count > 0) c.copy(mine, block_at(c.input, r, 0), count);
    return true;
  }
  if (!*c.state) *c.state = std::make_unique<Windows>();
  auto& w = static_cast<Windows&>(**c.state);
  // all_to_all[shm_rounds]'s layout: a lane per receiver in each window half, the parts every rank writes in a
  // round together a round's size.
  const bool cached = cached_windows(c);
  const std::size_t part_limit =
      (cached ? kShmCachedRoundBytes : kShmRoundBytes) / (static_cast<std::size_t>(p) * static_cast<std::size_t>(p - 1));
  const std::size_t part = std::max<std::size_t>(1, std::min(count, part_limit / es));  // elements
  const std::size_t lane = part * es;
  const auto up = static_cast<std::size_t>(p);
  if (!w.unavailable && up * lane > w.capacity) {
    w.unavailable = !grow(c, w, up * lane, std::max(up * lane, up * part_limit), 0);
  }
  if (w.unavailable) return false;
  const uint64_t first_round = w.calls;
  const std::size_t rounds = (count + part - 1) / part;
  auto half = [&](std::size_t k) { return ((first_round + k) % 2) * w.capacity; };
  // Round k's part of every other rank's block of this rank's input, into that rank's lane.
  auto copies_in = [&](std::size_t k, std::vector<Copy>& v) {
    const std::size_t at = k * part;
    const std::size_t len = std::min(part, count - at);
    for (int q = 0; q < p; ++q) {
      if (q != r) v.push_back({w.win->of(r) + half(k) + static_cast<std::size_t>(q) * lane, block_at(c.input, q, at), len * es, !cached});
    }
  };
  // Round k's part of this rank's block: its own input's, then the others' parts from their windows in rank order,
  // in cache-sized pieces, into block r of the work buffer (which may be the input itself: premul_sum).
  const std::size_t piece = std::max<std::size_t>(1, std::min(c.chunk_elems(), kPieceBytes / es));
  auto reduce_part = [&](std::size_t k) {
    const std::size_t at = k * part;
    const std::size_t len = std::min(part, count - at);
    for (std::size_t done = 0; done < len; done += piece) {
      const std::size_t n = std::min(piece, len - done);
      char* acc = c.at(mine, at + done);
      const char* own = block_at(c.input, r, at + done);
      if (own != acc) c.copy(acc, own, n);
      for (int q = 0; q < p; ++q) {
        if (q != r) c.reduce(acc, c.at(w.win->of(q) + half(k) + static_cast<std::size_t>(r) * lane, done), n);
      }
    }
  };
  run_rounds(c, w, rounds, cached, copies_in, [](std::size_t, std::vector<Copy>&) {}, reduce_part);
  return true;
}

namespace {

// How one collective's blocks go through the windows (shm_rounds_blocks): a block is `bytes`; a window half holds
// `lanes` parts (a lane per receiver where a writer sends each rank its own); `writers` ranks write `written`
// parts a round.
struct BlockFlow {
  Collective coll;
  int p, r, root;
  std::size_t bytes, lanes, writers, written;

  static BlockFlow of(const Args& a, int p, int r) {
    const auto up = static_cast<std::size_t>(p);
    switch (a.coll) {
      case Collective::kAllToAll: return {a.coll, p, r, 0, a.send.bytes() / up, up, up, up - 1};
      case Collective::kBroadcast: return {a.coll, p, r, a.root, a.send.bytes(), 1, 1, 1};
      case Collective::kGather: return {a.coll, p, r, a.root, a.send.bytes(), 1, up - 1, 1};
      case Collective::kScatter: return {a.coll, p, r, a.root, a.recv.bytes(), up, 1, up - 1};
      default: return {a.coll, p, r, 0, a.send.bytes(), 1, up, 1};  // all_gather
    }
  }
  bool rooted() const {
    return coll == Collective::kBroadcast || coll == Collective::kGather || coll == Collective::kScatter;
  }
  // Whether this rank writes into its window / reads the others'.
  bool writes() const {
    if (coll == Collective::kBroadcast || coll == Collective::kScatter) return r == root;
    if (coll == Collective::kGather) return r != root;
    return true;
  }
  bool reads(int q) const {
    if (q == r) return false;
    if (coll == Collective::kBroadcast || coll == Collective::kScatter) return q == root;
    if (coll == Collective::kGather) return r == root;
    return true;
  }
  // The lane of the window that rank q's part goes to (all_to_all, scatter: a lane per receiver).
  std::size_t lane(int q, std::size_t part) const { return lanes > 1 ? static_cast<std::size_t>(q) * part : 0; }
};

}  // namespace

bool shm_rounds_blocks(Context& c) {
  const Args& a = c.args;
  const int p = c.size();
  const int r = c.rank();
  const BlockFlow f = BlockFlow::of(a, p, r);
  // Rank q's block in this rank's output: all_gather, all_to_all, gather (the root): block q of recv; broadcast,
  // scatter: recv itself (broadcast: send and recv are the one buffer).
  char* const out = static_cast<char*>(a.recv.data);
  auto block = [&](int q) {
    return f.coll == Collective::kBroadcast || f.coll == Collective::kScatter ? out
                                                                              : out + static_cast<std::size_t>(q) * f.bytes;
  };
  // What this rank sends rank q: all_to_all, scatter (the root): block q of send; else its one block.
  const char* send = static_cast<const char*>(a.send.data);
  auto sent = [&](int q) { return f.lanes > 1 ? send + static_cast<std::size_t>(q) * f.bytes : send; };
  const bool own = f.coll != Collective::kBroadcast && (!f.rooted() || r == f.root);  // a block of its own to place
  // gather's root, in place: its block sits at the start of recv, where another rank's block is about to land: into
  // its place first. all_gather in place likewise (own_block_first). scatter's root, in place: its recv is the start
  // of send, whose blocks go out first: its own block last.
  if (f.coll == Collective::kGather && r == f.root && send != block(r)) std::memmove(block(r), send, f.bytes);
  if (f.coll == Collective::kAllGather) send = own_block_first(a, r);
  if (p > 1 && f.bytes > 0) {
    if (!*c.state) *c.state = std::make_unique<Windows>();
    auto& w = static_cast<Windows&>(**c.state);
    // A rank's window half holds round k's part of each block it sends (all_to_all, scatter: one per receiver, in
    // the lane of its index; all_gather, gather, broadcast: its one block). The parts the ranks write in a round
    // together are as large as the reduction's rounds (all_to_all on 2 ranks, plain stores: parts of 512 KiB
    // measured 0.8-0.95x the time of parts of 256 KiB from 1 to 64 MiB).
    const bool cached = cached_windows(c);
    const std::size_t part_limit = (cached ? kShmCachedRoundBytes : kShmRoundBytes) / (f.writers * f.written);
    const std::size_t part = std::min(f.bytes, part_limit);
    if (!w.unavailable && f.lanes * part > w.capacity) {
      w.unavailable = !grow(c, w, f.lanes * part, f.lanes * part_limit, 0);
    }
    if (w.unavailable) return false;
    const bool stream = a.recv.bytes() >= kStreamBytes;
    const uint64_t first_round = w.calls;
    const std::size_t rounds = (f.bytes + part - 1) / part;
    auto half = [&](std::size_t k) { return ((first_round + k) % 2) * w.capacity; };
    // Round k's part of what this rank sends: into its window (in the lane of each receiver), and of its own block
    // into its place while in cache (all_gather, all_to_all: read from send, all_to_all in place only after the
    // same round's part of send's block went into the window).
    auto copies_in = [&](std::size_t k, std::vector<Copy>& v) {
      const std::size_t at = k * part;
      const std::size_t len = std::min(part, f.bytes - at);
      char* window = w.win->of(r) + half(k);
      if (f.writes()) {
        if (f.lanes == 1) v.push_back({window, send + at, len, !cached});  // the one block its readers read
        for (int q = 0; f.lanes > 1 && q < p; ++q) {
          if (q != r) v.push_back({window + f.lane(q, part), sent(q) + at, len, !cached});
        }
      }
      if (own && !f.rooted() && sent(r) != block(r)) v.push_back({block(r) + at, sent(r) + at, len, stream});
    };
    // Round k's part of every block this rank receives, from its sender's window (from rank r + 1 on: the ranks
    // spread their reads).
    auto copies_out = [&](std::size_t k, std::vector<Copy>& v) {
      const std::size_t at = k * part;
      const std::size_t len = std::min(part, f.bytes - at);
      for (int s = 1; s < p; ++s) {
        const int q = (r + s) % p;
        if (f.reads(q)) v.push_back({block(q) + at, w.win->of(q) + half(k) + f.lane(r, part), len, stream});
      }
    };
    run_rounds(c, w, rounds, cached, copies_in, copies_out, [](std::size_t) {});
    if (stream) stream_copy_fence();
  } else if (own && !f.rooted() && f.bytes > 0 && sent(r) != block(r)) {
    std::memmove(block(r), sent(r), f.bytes);  // one rank, or nothing to send: its own block alone
  }
  if (f.coll == Collective::kScatter && r == f.root && sent(r) != out && f.bytes > 0) std::memmove(out, sent(r), f.bytes);
  return true;
}

}  // namespace dcomm::coll
