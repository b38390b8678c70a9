#pragma once
// A single-copy message copied by both sides at once (the split read). Cross-memory attach costs a fixed ~0.85 us
// a call and ~0.24 us a page on the VMs measured (the kernel pins every page), well below memcpy, so one
// process_vm_readv by the receiver alone leaves the sender's core idle while it waits for the ack. Instead the
// receiver posts kSplit (its destination's address) and copies from the front while the sender, when its progress
// sees the record, copies from the back with process_vm_writev into the receiver's buffer; they meet where the
// claims meet. Measured on this project's 2-core VM (two processes, a page-aligned 64 KiB-1 MiB message): one call
// 4.7-69 us, the same split in two halves 2.9-34 us.
//
// The claims are one 64-bit word in the pair's ring control (SplitBoard, in the receiver's segment): a generation
// (16 bits: which message the board is for), the next page the receiver takes (lo) and the end of what the sender
// has not taken (hi), in pages. Either side claims a piece with a compare-and-swap, so every page is copied by
// exactly one side, and a sender's late kSplit (the receiver finished alone and set the board up for another
// message) finds another generation and claims nothing. The sender adds the bytes it wrote to `done` after each
// write, or stores its errno in `error` and stops; the receiver completes when every page is claimed and the
// sender's are done (or it copies the sender's range itself after an error: the sender writes nothing after it).
// A sender that never progresses costs the receiver one more call (it reads its half, then the rest). A receiver
// that gives a message up (its transport closes: the mesh failed) claims what is left; a piece the sender is
// writing at that moment still lands, within one piece's copy (at most 1 MiB, ~60 us).

#include <atomic>
#include <cstdint>

namespace dcomm::transport::shm {

/// In the ring control of each pair (shm_ring.hpp): the split read of one message from the ring's producer.
struct SplitBoard {
  std::atomic<uint64_t> claim{0};  ///< gen:16 | lo:24 | hi:24 (pages); gen 0 is never used
  std::atomic<uint64_t> done{0};   ///< bytes the sender has written
  std::atomic<uint64_t> msg{0};    ///< the sender's msg_id of the message the board is for
  std::atomic<int32_t> error{0};   ///< the sender's errno; it writes nothing after it
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the split board must be lock-free across processes");

inline constexpr uint64_t kSplitPageBytes = 4096;
/// Pages a claim word can count: messages up to 64 GiB split; larger ones take the whole read.
inline constexpr uint64_t kSplitMaxPages = (uint64_t{1} << 24) - 1;
/// Smaller messages are read by the receiver alone: two calls and the kSplit record cost what halving the pages
/// saves (sendrecv with CMA forced: 20 KiB 1.11-1.15x OpenMPI's time split against 1.06-1.09x alone, 40 KiB even,
/// 80 KiB 0.82-0.83x against 1.04-1.06x).
inline constexpr uint64_t kSplitMinBytes = 64 << 10;
/// The largest piece one claim takes: large messages are shared in pieces, so that the side that runs faster
/// copies more; ~1% of a piece's copy is the call's fixed cost.
inline constexpr uint64_t kSplitPiecePages = 256;

struct SplitClaim {
  uint64_t begin = 0;  ///< bytes
  uint64_t end = 0;    ///< bytes; empty: nothing left (or the board moved on to another message)
  bool empty() const { return begin >= end; }
};

inline uint64_t split_pack(uint16_t gen, uint64_t lo, uint64_t hi) {
  return uint64_t{gen} << 48 | lo << 24 | hi;
}
inline uint16_t split_gen(uint64_t w) { return static_cast<uint16_t>(w >> 48); }
inline uint64_t split_lo(uint64_t w) { return (w >> 24) & kSplitMaxPages; }
inline uint64_t split_hi(uint64_t w) { return w & kSplitMaxPages; }
inline uint64_t split_pages(uint64_t bytes) { return (bytes + kSplitPageBytes - 1) / kSplitPageBytes; }
/// Pages per claim for a message of `bytes`: half of it, at most kSplitPiecePages.
inline uint64_t split_piece(uint64_t bytes) {
  const uint64_t half = (split_pages(bytes) + 1) / 2;
  return half < kSplitPiecePages ? (half == 0 ? 1 : half) : kSplitPiecePages;
}

/// Receiver: sets the board up for a message of `bytes` (generation `gen`, not 0) before posting kSplit.
inline void split_open(SplitBoard& b, uint16_t gen, uint64_t bytes, uint64_t msg_id) {
  b.done.store(0, std::memory_order_relaxed);
  b.msg.store(msg_id, std::memory_order_relaxed);
  b.error.store(0, std::memory_order_relaxed);
  b.claim.store(split_pack(gen, 0, split_pages(bytes)), std::memory_order_release);
}

/// Claims up to `piece` pages from the front (the receiver) or the back (the sender) of message `gen` of `bytes`.
inline SplitClaim split_take(SplitBoard& b, uint16_t gen, uint64_t bytes, uint64_t piece, bool front) {
  uint64_t w = b.claim.load(std::memory_order_acquire);
  for (;;) {
    if (split_gen(w) != gen) return {};
    const uint64_t lo = split_lo(w), hi = split_hi(w);
    if (lo >= hi) return {};
    const uint64_t n = hi - lo < piece ? hi - lo : piece;
    const uint64_t nlo = front ? lo + n : lo, nhi = front ? hi : hi - n;
    if (b.claim.compare_exchange_weak(w, split_pack(gen, nlo, nhi), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      const uint64_t first = front ? lo : nhi, last = front ? nlo : hi;
      const uint64_t end = last * kSplitPageBytes < bytes ? last * kSplitPageBytes : bytes;
      return {first * kSplitPageBytes, end};
    }
  }
}

/// Sender, after a claim for `msg_id`: whether the board is that message's. A generation is 16 bits: a kSplit left
/// unread in the sender's ring while the receiver went through 65,536 more split reads from it would claim from
/// another message's board. The board cannot move on while a claim of the sender's is outstanding (the receiver
/// waits for it), so once claimed the message it names is settled; a sender that finds another one writes nothing
/// and reports an error (the receiver then copies that range itself).
inline bool split_claim_is_for(const SplitBoard& b, uint64_t msg_id) {
  return b.msg.load(std::memory_order_relaxed) == msg_id;
}

/// Receiver, once its own claims come back empty: the bytes the sender took ([hi, end) of the message).
inline uint64_t split_sender_bytes(const SplitBoard& b, uint64_t bytes) {
  const uint64_t from = split_hi(b.claim.load(std::memory_order_acquire)) * kSplitPageBytes;
  return from < bytes ? bytes - from : 0;
}

/// Receiver, when it gives the message up (close): claims everything left, so the sender starts no more copies.
inline void split_cancel(SplitBoard& b, uint16_t gen) {
  uint64_t w = b.claim.load(std::memory_order_acquire);
  while (split_gen(w) == gen && split_lo(w) < split_hi(w) &&
         !b.claim.compare_exchange_weak(w, split_pack(gen, split_hi(w), split_hi(w)), std::memory_order_acq_rel)) {
  }
}

/// The receiver's next piece: claims it from the front and reads it from process `pid` (its message at `remote`)
/// into `local` (the whole message's buffer). Returns the claim, empty when nothing is left; `*err` the read's
/// errno (0: read).
SplitClaim split_read_piece(SplitBoard& b, uint16_t gen, uint64_t bytes, int pid, char* local, uint64_t remote,
                            int* err);
/// The sender's next piece of message `msg_id`: claims it from the back and writes it from `local` (the whole
/// message) into process `pid` at `remote` (the receiver's buffer). Returns the claim, empty when nothing is left;
/// `*err` the write's errno, ESTALE for a claim on another message's board (nothing written), 0: written.
SplitClaim split_write_piece(SplitBoard& b, uint16_t gen, uint64_t msg_id, uint64_t bytes, int pid, const char* local,
                             uint64_t remote, int* err);

}  // namespace dcomm::transport::shm
