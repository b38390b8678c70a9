// Pipelined copies through shared-memory windows (see shm_pipe.hpp).
#include "collectives/shm_pipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <dcomm/error.hpp>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/shm_segments.hpp"
#include "collectives/stream_copy.hpp"
#include "collectives/topology.hpp"

namespace dcomm::coll {

namespace {

constexpr std::size_t kLine = 64;
// Slots per lane: with one lane, 8 pieces (2 MiB) let the producer run well ahead of a consumer that was
// descheduled; with a lane per reader, 4 each.
constexpr std::size_t kOneLaneDepth = 8;
constexpr std::size_t kPerPeerDepth = 4;
// The most a window's data may take with a lane per reader: pieces shrink on large groups instead (down to
// kMinPiece), so that /dev/shm holds at most P times this.
constexpr std::size_t kPerPeerBudget = std::size_t{8} << 20;
constexpr std::size_t kMinPiece = std::size_t{32} << 10;

// A slot's head, on a cache line of its own; the stamp is stored last (release).
struct SlotHead {
  std::atomic<uint64_t> stamp;
  uint64_t seq;    ///< the call the piece belongs to
  uint64_t piece;  ///< its index in its block
  uint64_t bytes;  ///< its size
  uint64_t block;  ///< the block's size
};
static_assert(sizeof(SlotHead) <= kLine, "a slot head fits a cache line");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "stamps must be lock-free across processes");

std::size_t depth_of(PipeLanes lanes) { return lanes == PipeLanes::kOne ? kOneLaneDepth : kPerPeerDepth; }
std::size_t lanes_of(PipeLanes lanes, int size) { return lanes == PipeLanes::kOne ? 1 : static_cast<std::size_t>(size); }

std::size_t piece_of(PipeLanes lanes, int size) {
  if (lanes == PipeLanes::kOne) return kPipePieceBytes;
  const std::size_t fits = kPerPeerBudget / (lanes_of(lanes, size) * kPerPeerDepth) / 4096 * 4096;
  return std::clamp(fits, kMinPiece, kPipePieceBytes);
}

int world_rank(const GroupView& v, int q) { return v.world_ranks.empty() ? q : v.world_ranks[static_cast<std::size_t>(q)]; }

// What Mesh::wait_until polls: a stamp (a slot's, or a reader's acknowledgement) reaching `want`.
struct Awaited {
  const std::atomic<uint64_t>* word;
  uint64_t want;
  bool ack;  ///< a reader's acknowledgement (else a piece)
  int rank;  ///< the group rank that writes `word`
  std::size_t piece, pieces, piece_bytes, block_bytes;
  uint64_t seq;
};

bool reached(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  return a->word->load(std::memory_order_acquire) >= a->want;
}

std::string describe(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  if (a->ack) {
    return fmt::format("rank {}'s acknowledgement of an earlier piece in this rank's shared-memory window, before "
                       "piece {} of {} ({} of a {} block) of call #{} of this group may take its slot",
                       a->rank, a->piece + 1, a->pieces, format_bytes(a->piece_bytes), format_bytes(a->block_bytes),
                       a->seq);
  }
  return fmt::format("piece {} of {} ({} of a {} block) in rank {}'s shared-memory window for call #{} of this group",
                     a->piece + 1, a->pieces, format_bytes(a->piece_bytes), format_bytes(a->block_bytes), a->rank,
                     a->seq);
}

void await(const Context& c, Awaited& a) {
  if (!reached(&a)) c.view.mesh->wait_until(reached, describe, &a, world_rank(c.view, a.rank), c.deadline, c.what);
}

}  // namespace

// Where things sit in a window: the readers' acknowledgement lines (lane × reader), the slot heads (lane × depth),
// then the pieces (lane × depth), page-aligned.
struct ShmPipe::Layout {
  std::size_t lanes, depth, piece;
  int size;
  std::size_t heads() const { return lanes * static_cast<std::size_t>(size) * kLine; }
  std::size_t data() const { return (heads() + lanes * depth * kLine + 4095) / 4096 * 4096; }
  std::size_t bytes() const { return data() + lanes * depth * piece; }
  std::size_t slot(std::size_t lane, uint64_t stamp) const { return lane * depth + (stamp - 1) % depth; }

  static std::atomic<uint64_t>& ack(char* w, std::size_t lane, int reader, int size) {
    return *reinterpret_cast<std::atomic<uint64_t>*>(w + (lane * static_cast<std::size_t>(size) +
                                                          static_cast<std::size_t>(reader)) * kLine);
  }
  SlotHead& head(char* w, std::size_t s) const { return *reinterpret_cast<SlotHead*>(w + heads() + s * kLine); }
  char* piece_at(char* w, std::size_t s) const { return w + data() + s * piece; }
};

ShmPipe* ShmPipe::open(const Context& c, PipeLanes lanes, const char* instead) {
  struct Unavailable final : AlgorithmState {};
  if (*c.state) return dynamic_cast<ShmPipe*>(c.state->get());
  const Layout l{lanes_of(lanes, c.size()), depth_of(lanes), piece_of(lanes, c.size()), c.size()};
  std::unique_ptr<ShmWindows> win = open_windows(c, l.bytes(), 0, instead);
  if (!win) {
    *c.state = std::make_unique<Unavailable>();  // every rank alike: the fallback from now on
    return nullptr;
  }
  const bool whole = whole_pieces(lanes, c.view.hierarchy && c.view.hierarchy->topo.shares_cores);
  *c.state = std::unique_ptr<ShmPipe>(new ShmPipe(std::move(win), lanes, c.size(), l.piece, whole));
  return static_cast<ShmPipe*>(c.state->get());
}

ShmPipe::ShmPipe(std::unique_ptr<ShmWindows> win, PipeLanes lanes, int size, std::size_t piece, bool whole)
    : win_(std::move(win)),
      lanes_(lanes),
      size_(size),
      piece_(piece),
      whole_(whole),
      sent_(lanes_of(lanes, size), 0),
      last_(lanes_of(lanes, size) * depth_of(lanes), 0),
      taken_(static_cast<std::size_t>(size), 0) {}

ShmPipe::~ShmPipe() = default;

std::size_t ShmPipe::ahead() const { return depth_of(lanes_) - 1; }

namespace {
// `whole`: the block in as few pieces as the slot allows (whole_pieces()).
std::size_t piece_within(std::size_t slot, std::size_t bytes, bool whole) {
  if (whole) return std::clamp((bytes + 4095) / 4096 * 4096, std::size_t{4096}, slot);
  constexpr std::size_t kSmallest = std::size_t{16} << 10;
  return std::clamp((bytes / 8 + 4095) / 4096 * 4096, std::min(kSmallest, slot), slot);
}
}  // namespace

std::size_t ShmPipe::piece_for(std::size_t bytes) const { return piece_within(piece_, bytes, whole_); }

bool whole_pieces(PipeLanes lanes, bool shared_cores) { return lanes == PipeLanes::kPerPeer && shared_cores; }

std::size_t pipe_pieces(PipeLanes lanes, int size, std::size_t bytes, bool shared_cores) {
  const std::size_t piece = piece_within(piece_of(lanes, size), bytes, whole_pieces(lanes, shared_cores));
  return (bytes + piece - 1) / piece;
}

PipeStores reader_bound_stores(const Context& c) {
  return c.view.hierarchy && c.view.hierarchy->topo.shares_cores ? PipeStores::kPlain : PipeStores::kStream;
}

void ShmPipe::put(const Context& c, int to, const char* block, std::size_t bytes, std::size_t k,
                  PipeStores stores) {
  const Layout l{lanes_of(lanes_, size_), depth_of(lanes_), piece_, size_};
  const std::size_t lane = lane_of(to);
  char* w = win_->of(c.rank());
  const uint64_t stamp = ++sent_[lane];
  const std::size_t s = l.slot(lane, stamp);
  const std::size_t piece = piece_for(bytes);
  const std::size_t len = std::min(piece, bytes - k * piece);
  // The slot's last piece must have been copied out by every reader of the lane.
  for (int q = 0; q < size_ && last_[s] != 0; ++q) {
    if (q == c.rank() || (lanes_ == PipeLanes::kPerPeer && q != to)) continue;
    Awaited a{&Layout::ack(w, lane, q, size_), last_[s], true, q, k, pieces(bytes), len, bytes, c.seq};
    await(c, a);
  }
  SlotHead& h = l.head(w, s);
  // Stamp 0 while the slot is rewritten, as a sequence lock: a reader whose counts have drifted from this rank's
  // (calls that differ with the check off) sees its stamp change under its copy and raises, never keeping a torn
  // piece. The fences keep non-temporal stores behind the stamp's 0 and ahead of its new value.
  h.stamp.store(0, std::memory_order_relaxed);
  stream_copy_fence();
  if (stores == PipeStores::kPlain) {
    std::memcpy(l.piece_at(w, s), block + k * piece, len);
  } else {
    stream_copy(l.piece_at(w, s), block + k * piece, len);
  }
  stream_copy_fence();
  h.seq = c.seq;
  h.piece = k;
  h.bytes = len;
  h.block = bytes;
  h.stamp.store(stamp, std::memory_order_release);
  last_[s] = stamp;
}

void ShmPipe::take(const Context& c, int from, std::size_t bytes, std::size_t k,
                   const std::function<void(const char*, std::size_t, std::size_t)>& use) {
  const Layout l{lanes_of(lanes_, size_), depth_of(lanes_), piece_, size_};
  const std::size_t lane = lane_of(c.rank());
  char* w = win_->of(from);
  const uint64_t stamp = ++taken_[static_cast<std::size_t>(from)];
  const std::size_t s = l.slot(lane, stamp);
  const std::size_t piece = piece_for(bytes);
  const std::size_t len = std::min(piece, bytes - k * piece);
  SlotHead& h = l.head(w, s);
  Awaited a{&h.stamp, stamp, false, from, k, pieces(bytes), len, bytes, c.seq};
  await(c, a);
  auto disagree = [&] {
    return InvalidUsageError(fmt::format(
        "{}: rank {} published piece {} of a {} block for call #{} where this rank expected piece {} of a {} block "
        "for call #{}; the ranks' calls disagree (count, dtype, root or order of calls) - check that every rank "
        "passes matching arguments (DCOMM_CHECK_CALLS=1 names the rank)",
        c.what, from, h.piece + 1, format_bytes(h.block), h.seq, k + 1, format_bytes(bytes), c.seq));
  };
  if (h.seq != c.seq || h.piece != k || h.block != bytes || h.stamp.load(std::memory_order_relaxed) != stamp) {
    throw disagree();
  }
  use(l.piece_at(w, s), k * piece, len);
  // The sequence lock's second read: the piece was not rewritten while it was read (only ever with counts that
  // drifted apart; see put()).
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not model fences (GCC refuses them under -fsanitize=thread): a read-modify-write with
  // release order keeps the piece's reads before the second read of the stamp the same way.
  if (h.stamp.fetch_add(0, std::memory_order_acq_rel) != stamp) throw disagree();
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.stamp.load(std::memory_order_relaxed) != stamp) throw disagree();
#endif
  // The reads are done: the producer may reuse the slot.
  Layout::ack(w, lane, c.rank(), size_).store(stamp, std::memory_order_release);
}

void ShmPipe::get(const Context& c, int from, char* block, std::size_t bytes, std::size_t k, bool stream) {
  take(c, from, bytes, k, [&](const char* piece, std::size_t at, std::size_t len) {
    if (stream) {
      stream_copy(block + at, piece, len);
    } else {
      std::memcpy(block + at, piece, len);
    }
  });
}

void ShmPipe::reduce(const Context& c, int from, char* block, std::size_t bytes, std::size_t k) {
  // Pieces are multiples of 4 KiB but the last, so they hold whole elements.
  take(c, from, bytes, k, [&](const char* piece, std::size_t at, std::size_t len) {
    c.reduce(block + at, piece, len / c.esize());
  });
}

void run_instead(const Context& c, void (*instead)(Context&)) {
  constexpr uint32_t kFallbackStep = 1000;  // above the steps open_windows used
  Context f = c.on(c.view, kFallbackStep);
  instead(f);
}

bool supports_shm_pipe(const Args& args, const GroupView& view) {
  return args.send.device.is_host() && args.recv.device.is_host() && !args.vector_variant &&
         group_on_one_host(view);
}

double cost_shm_pipe(const CostParams& p, double copied, double pieces) {
  return (2.0 + pieces / 4.0) * p.alpha + copied * p.gamma;
}

double cost_shm_pipe_exchange(const CostParams& p, double n, int size) {
  // A rank publishes and takes on its own core, so it cannot publish while it waits for a peer's piece, nor take
  // while a peer waits for its acknowledgement: each piece it takes costs a hand-off each way, 2α (the rows whose
  // copies in and out run on different cores pay α/4, cost_shm_pipe). Fitted for all_to_all to where cma and
  // shm_direct crossed when measured (docs/algorithms.md): 1-2 MiB on 2 ranks, 1-4 MiB on 4. reduce_scatter's pipe
  // is the same exchange with a reduction where it takes: priced at α/4 a piece, the model chose it over
  // reduce_scatter[shm_rounds], which measured 0.55-0.85x its time from 64 KiB to 64 MiB on 2-4 ranks (session 10).
  // Where the probe measured non-temporal window stores (ranks with cores of their own: reader_bound_stores), every
  // byte a rank takes is read from memory, as in the rooted pipes (cost_shm_pipe_rooted): priced at γ alone the
  // model took all_to_all[shm_direct] at 4-64 MiB on 2 ranks bound, 1.5-1.8x cma's time at 4-16 MiB (session 29,
  // DCOMM_TUNE=off: 4 MiB 580-640 us against 382-398).
  const auto block = static_cast<std::size_t>(n / std::max(size, 1));
  const double pieces = static_cast<double>(pipe_pieces(PipeLanes::kPerPeer, size, block, p.shared_cores));
  return (2.0 + 4.0 * (size - 1) * pieces) * p.alpha + 2.0 * fraction(size) * n * p.gamma +
         cost_shm_pipe_streamed(p, fraction(size) * n);
}

double cost_shm_pipe_streamed(const CostParams& p, double bytes) {
  // Where the group's probe measured non-temporal window stores (not where ranks share cores: the rows store plain
  // there, reader_bound_stores), every byte through the window is read from memory: the probe's price, as
  // all_reduce[shm_direct] pays. Priced at γ alone, the model chose shm_direct for scatter, gather and broadcast on 2
  // ranks at every size, where it measured 1.3-2.6x linear's (chain's) time from 64 KiB to 16 MiB (session 25:
  // scatter 5.8 / 3.4 us at 64 KiB, 1.41 / 1.08 ms at 16 MiB; broadcast 9.3 / 3.7 us, 1.92 / 1.52 ms), and the
  // matrix took it whenever a measurement again put the group's choices back to the model (3 runs of 4).
  return p.window_streamed_beta >= 0 ? bytes * p.window_streamed_beta : 0.0;
}

double cost_shm_pipe_rooted(const CostParams& p, double n, int size) {
  const double per_rank = n / size;
  const double piece = static_cast<double>(kPipePieceBytes);
  return cost_shm_pipe(p, fraction(size) * n + std::min(per_rank, piece), (size - 1) * std::ceil(per_rank / piece)) +
         cost_shm_pipe_streamed(p, fraction(size) * n);
}

}  // namespace dcomm::coll
