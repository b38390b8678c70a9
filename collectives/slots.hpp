#pragma once
// Slots: small collectives and the call check through shared memory, for groups on one node. Every rank owns a
// ring of kSlotDepth slots (exchange n takes slot n % kSlotDepth), in a segment every other rank of the group
// maps. One exchange:
//   1. this rank writes its call (the check's descriptor, compacted so that it shares the first cache line with
//      the flag and the first 24 bytes of data) and its data into its slot, then sets the slot's flag to the
//      exchange's number (a release store);
//   2. it waits for every other rank's flag to show the same number (bounded by the call's deadline, watching
//      that rank's liveness: transport::Mesh::wait_until), then reads their slots directly.
// An 8-byte all_reduce on 2 ranks is one cache line written and one read - no message, no matching, no
// allocation, no lock. Every rank reads every descriptor, so the check's guarantees hold as with messages: the
// same InvalidUsageError on every rank, naming the lowest invalid or mismatched rank (call_check.hpp).
//
// Rooted calls do not synchronise every rank (`reads` below): a rank whose part only sends (reduce's and gather's
// non-roots, broadcast's and scatter's root) publishes and returns, like an eager send; broadcast's and scatter's
// non-roots read the root's slot alone. Such a rank has not seen every rank's call, so the exchange stays
// "pending" and is checked later (settle()): it waits for every rank's flag of that exchange and compares every
// rank's call. A call that reads every slot first checks every pending exchange (it waits for the others anyway);
// any other call, once kSettleBatch exchanges are pending, checks those already complete without waiting - so a
// sender, or a reader of the root alone, runs ahead of the slowest rank, as MPI's eager sends do (the flow control
// below bounds how far). In batches, not at every call: a sender that looked at every call read the line its reader
// was about to write (the reader's flag of the oldest pending exchange), a line crossing cores twice per call; a
// batch reads lines long written (8 B broadcast on 2 ranks bound: 0.19-0.20 us a call -> 0.16-0.17).
// A pending check takes what another rank checked: a rank that reads every slot (on 2 ranks, every reader) keeps
// agreement lines of its own (slot_layout.hpp: the newest exchange through which it found every call alike, written
// at the end of each block of kSettleBatch exchanges to two lines by turns, and the last at which it met a failed
// check), and a rank with pending checks reads them once every kSettleBatch exchanges, at multiples of it - the line
// of the block before last, which a sender asks for a call earlier and finds unchanged - taking what they cover as
// checked. It compares the calls itself only where the lines did not move since its last reading (no rank reads
// every slot: a broadcast on 3 or more ranks) or a line reports a failure it has not checked itself, and for the
// exchanges it must check now (their slots are the next to be reused). The batch's eight reads of slots its reader
// had just written were a pause of 0.25-0.5 us at every 8th call of a sender (2 ranks bound, 8 B: p99 0.44 us ->
// 0.21); one line its reader rewrote at every call, read at every 8th, still made that call 1.9x the others' median
// (130-147 ns against 67-73; by blocks, prefetched: 70-75).
//
// The flags are the acknowledgements. A rank publishes exchange n only once every other rank has published
// exchange n - kCallsAhead (a bounded wait naming the rank it waits for), and a rank publishes exchange e only
// after it has finished every read of e - 1 (a call reads its data before the next call starts) and checked every
// exchange through e - (kSlotDepth - kCallsAhead) (a blocking check only there: the slots of those exchanges are
// the next to be reused). Together: nobody overwrites a slot that a rank still reads or has yet to check, and a
// sender runs at most kCallsAhead calls ahead of the slowest rank. Every rank publishes its call in every
// exchange, even where nobody needs its data, so any rank can always see every rank's call.
//
// The check's semantics (docs/errors.md#mismatched-calls-through-the-slots): a rank that reads another's data
// compares that rank's call with its own first; on any difference it waits for every rank's slot and throws the
// check's error (the lowest invalid or mismatched rank), so no rank consumes the data of another call. A rank that
// returned before seeing every call (a sender, a reader of the root alone) learns of a mismatch at a later call on
// the group (the next call that reads every slot, or at most kSlotDepth - kCallsAhead calls later), or at the
// group's destruction (logged): that call then fails on this rank with the earlier call's error, and this rank
// publishes it as a "late notice" in place of its call, so every rank that reads this rank's part of that call
// fails it too, naming this rank; ranks that do not read it are not held up (they learned of the earlier failure
// themselves). The pending check ignores late notices: the failure they report is already known to every rank, so
// it is reported once per rank, not in a cascade; and a rank reports the first failed check among the calls it
// returned from early, not the later ones of the same window (whoever read their data compared their calls).
//
// With the call check on, every call of the group goes through the slots (the check of an algorithm that moves
// data by messages is one exchange without data), so ranks whose calls differ meet in the same exchange and fail
// alike. With it off (DCOMM_CHECK_CALLS=0) only the slot algorithms use them, and calls that differ time out.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <memory>
#include <string_view>
#include <vector>

#include "collectives/call_check.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

/// The most data one rank's slot carries; larger calls take algorithms that send messages.
inline constexpr std::size_t kSlotBytes = 4096;
/// Slots per rank (exchange n takes slot n % kSlotDepth), and how many calls a rank that does not read every slot
/// may run ahead of the slowest rank. Deep enough that ranks sharing a core (4 ranks on 2 cores) run many calls
/// per time slice instead of one: a sender fills the ring while its reader waits for the core. 128 and 64, not 64
/// and 32: 3 ranks on 2 cores, 8 B broadcast, dcomm-bench's loop 0.35-0.47 us a call -> 0.31-0.36 (10 alternations,
/// lower in each; session 28), the sender stopping half as often for its readers' time slices. Each rank's ring
/// takes 128 x (64 + 4,096) B = 532 KiB of shared memory per group (data pages touched only by calls of more than
/// the 24 bytes a head carries, as the ring goes round).
inline constexpr uint64_t kSlotDepth = 128;
inline constexpr uint64_t kCallsAhead = 64;
/// Pending exchanges (see above) a call that reads not every slot lets gather before it checks those complete.
inline constexpr uint64_t kSettleBatch = 8;
static_assert(kCallsAhead >= 1 && kCallsAhead < kSlotDepth, "see the flow control in slots.hpp");
static_assert(kSettleBatch >= 1 && kSettleBatch <= kSlotDepth - kCallsAhead, "checked before the slots are reused");
static_assert((kSettleBatch & (kSettleBatch - 1)) == 0, "a power of two: the agreement lines go by its blocks");

class ShmWindows;

namespace detail {
/// n in [sizeof(Word), 2 * sizeof(Word)] bytes as two overlapping moves of a Word, every load before any store.
template <typename Word>
inline void copy_head_tail(char* d, const char* s, std::size_t n) {
  Word head, tail;
  std::memcpy(&head, s, sizeof(Word));
  std::memcpy(&tail, s + n - sizeof(Word), sizeof(Word));
  std::memcpy(d, &head, sizeof(Word));
  std::memcpy(d + n - sizeof(Word), &tail, sizeof(Word));
}
}  // namespace detail

/// memcpy for the few bytes of a small call: up to 16 bytes in two inline moves of 8, 4 or 1 bytes (every load before
/// any store), where the library call and its size dispatch cost more than the copy; memcpy beyond.
inline void copy_bytes(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (n > 16) {
    std::memcpy(d, s, n);
  } else if (n >= 8) {
    detail::copy_head_tail<uint64_t>(d, s, n);
  } else if (n >= 4) {
    detail::copy_head_tail<uint32_t>(d, s, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

/// memmove for the few bytes of a small call: copy_bytes up to 16 bytes (its loads all come before its stores, so the
/// two ranges may overlap), memmove beyond.
inline void move_bytes(void* dst, const void* src, std::size_t n) {
  if (n > 16) {
    std::memmove(dst, src, n);
  } else {
    copy_bytes(dst, src, n);
  }
}

/// Whether <collective>[slot] (algorithms/slot.cpp) moves this call through the group's slots; where not, it runs
/// the check and then slot_fallback().
bool slots_take(const Args& args, const GroupView& view);
const Algorithm& slot_fallback(Collective c);

/// The part of one rank's exchange that follows from the call's shape alone (SlotChannel::plan): the call as its slot
/// holds it, what the slot's state says, whose slots the rank reads and how many bytes it publishes. The engine makes
/// one when a shape first runs through the slots and reuses it while the calls repeat the shape (Context::slot_plan),
/// so a repeated small call compacts, looks up and decides nothing again.
struct SlotPlan {
  alignas(8) unsigned char call[24]{};  ///< the compacted call descriptor (slot_layout.hpp's SlotCall); zeros: none
  uint8_t state = 0;                    ///< the slot's state: a call, an invalid call, or the check off
  bool checked = false;                 ///< it carries a call (the check is on)
  int reads = -1;                       ///< SlotChannel::kReadAll, kReadNone, or the one rank read
  std::size_t bytes = 0;                ///< what this rank publishes (<= kSlotBytes)
};

/// The plan of <collective>[slot] for this rank's call (`call`: its descriptor, null with the check off), or false
/// when the slots do not take the call (slots_take).
bool plan_slot(const Args& args, const GroupView& view, const CallDescriptor* call, SlotPlan* plan);

class SlotChannel {
 public:
  /// Collective over the group `c` describes (it sends a few agreement messages with steps from `step`, using
  /// 2⌈log₂P⌉ of them). Returns null on every rank when the group has one rank, is not on one host, DCOMM_SLOTS=0,
  /// or any rank could not create its segment (logged): the group then runs on messages alone.
  static std::shared_ptr<SlotChannel> create(const Context& c, uint32_t step);
  ~SlotChannel();
  SlotChannel(const SlotChannel&) = delete;
  SlotChannel& operator=(const SlotChannel&) = delete;

  /// Which slots a rank reads in one exchange: every other rank's (kReadAll), none (kReadNone: it only sends, and
  /// returns once published), or group rank q's alone (q >= 0).
  static constexpr int kReadAll = -1;
  static constexpr int kReadNone = -2;
  /// A segment holds kSlotDepth heads of one cache line each, side by side, then kSlotDepth data areas of
  /// kSlotBytes. A head carries the flag, the call and up to kInlineBytes of data; larger data goes in its area.
  /// Side by side, not a head in front of each area: a rank reads and writes the slots of consecutive exchanges, and
  /// consecutive lines are what the processor's prefetchers fetch ahead (4,160 B apart, every exchange's line was a
  /// miss of its own, in a new page).
  static constexpr std::size_t kHeadStride = 64;
  static constexpr std::size_t kInlineBytes = 64 - 40;
  static constexpr std::size_t kHeadsBytes = kSlotDepth * kHeadStride;

  /// One exchange (see above): first the pending checks of the exchanges this rank returned from before seeing
  /// every call (all of them when this call reads every slot), and the wait for room in the ring; then publishes
  /// this rank's call (`mine`; null when checks are off), or the reason it is `invalid` (its data is then ignored;
  /// it reads every slot), and `bytes` (<= kSlotBytes) of `data`; waits for the slots it `reads`. With `mine` set, throws the check's InvalidUsageError when a rank it read (or, with
  /// kReadAll, any rank) is invalid or differs. Then data(q) holds what rank q published, for the ranks read,
  /// until this rank's next exchange. `c.what` must outlive the group (the engine's per-algorithm name).
  void exchange(const Context& c, const CallDescriptor* mine, std::string_view invalid, const void* data,
                std::size_t bytes, int reads = kReadAll);
  /// The same exchange for a call whose fixed part is planned (plan()): publishes `plan.bytes` of `data`.
  void exchange(const Context& c, const SlotPlan& plan, const void* data);
  /// The fixed part of an exchange (see exchange() above for the arguments). Throws kInternal, starting with `what`,
  /// when `bytes` exceed kSlotBytes.
  SlotPlan plan(std::string_view what, const CallDescriptor* mine, std::string_view invalid, std::size_t bytes,
                int reads);
  /// The pending checks, if any, bounded by `deadline`; for the group's destruction (`view`: the group's). Never
  /// throws: a mismatch or a failure is logged.
  void settle_quietly(const GroupView& view, const Deadline& deadline) noexcept;
  /// What group rank q published in the last exchange; `expected` is the size this rank's call expects of it: a
  /// different size (only when checks are off and the calls differ) throws InvalidUsageError naming q.
  const char* data(const Context& c, int q, std::size_t expected) const {
    // After an exchange whose reads compared every call read with this rank's and found them alike and valid, a slot
    // read holds what this rank's call expects of it (the sizes follow from the call); else checked_data().
    if (read_alike_) return slot_data(q, exchanges_, expected);
    return checked_data(c, q, expected);
  }

  /// A byte this rank publishes with its exchanges from now on, outside its call (the check does not compare it):
  /// the engine's notes to the group (engine.cpp: the windows were slow). notes(): after an exchange that read
  /// every slot, the OR of every rank's byte in it, the same on every rank; 0 after any other exchange.
  void set_note(uint8_t note) { note_ = note; }
  uint8_t notes() const { return notes_; }

 private:
  SlotChannel(std::unique_ptr<ShmWindows> windows, int rank, int size);
  /// data() where the calls were not compared, or differed: throws unless q published `expected` bytes of a call.
  const char* checked_data(const Context& c, int q, std::size_t expected) const;
  /// Rank q's head of an exchange (its flag, call and inline data).
  char* slot(int q, uint64_t exchange) const {
    static_assert((kSlotDepth & (kSlotDepth - 1)) == 0, "a power of two: a mask, not a division");
    return bases_[static_cast<std::size_t>(q)] + (exchange & (kSlotDepth - 1)) * kHeadStride;
  }
  /// Where rank q's `bytes` of data of an exchange are: in its head up to kInlineBytes, else in its data area.
  char* slot_data(int q, uint64_t exchange, std::size_t bytes) const {
    if (bytes <= kInlineBytes) return slot(q, exchange) + (kHeadStride - kInlineBytes);
    return bases_[static_cast<std::size_t>(q)] + kHeadsBytes + (exchange & (kSlotDepth - 1)) * kSlotBytes;
  }
  /// Waits for every other rank's flag of exchange n (call `seq`).
  void wait_all(const Context& c, uint64_t n, uint64_t seq) const;
  /// Whether every other rank's flag of exchange m is set (no wait).
  bool all_published(uint64_t m) const;
  /// The check over every rank's slot of exchange n: throws on an invalid, check-off or mismatched call.
  /// `late_notices`: a late notice counts as an invalid call (else it is left out of the comparison).
  void verdict(const Context& c, uint64_t n, bool late_notices) const;
  /// Whether every rank's slot of exchange n holds a call equal to this rank's (the check's fast path).
  bool all_agree(uint64_t n) const;
  /// The pending checks (see above), in order: every one through exchange `must` (waiting for the others'
  /// flags), then those already complete; those another rank checked already (told_by_others()) need no reads
  /// of their slots. Returns the first failure's text (this rank then drops the rest), or "".
  std::string settle(const Context& c, uint64_t must);
  /// Exchange n of a call that learned from settle() that an earlier call failed the check (`late`): publishes the
  /// late notice in place of the call's data and throws. Out of line: a call's path builds no string.
  [[noreturn, gnu::noinline]] void late_notice(const Context& c, uint64_t n, const SlotPlan& p,
                                               const std::string& late);
  /// What the other ranks' agreement lines say (slot_layout.hpp), read at exchange x: the newest exchange through
  /// which one of them read every rank's call and found all alike with no failed check since this rank's verified_
  /// (0: none), and whether one met a failed check after verified_.
  struct Told {
    uint64_t through = 0;
    bool failure = false;
  };
  Told told_by_others(uint64_t x) const;
  /// Asks for the agreement lines told_by_others(x) reads (a sender, one call before it reads them).
  void prefetch_told(uint64_t x) const;
  /// This rank met a failed check at exchange n (its agreement line's `failed`): the ranks that rely on its line
  /// compare the pending calls themselves.
  void note_failed_check(uint64_t n);
  /// Before exchange n, past room_: waits until every other rank has published exchange n - kCallsAhead (see
  /// above), and moves room_ as far as their flags allow.
  void wait_for_room(const Context& c, uint64_t n);
  static constexpr uint64_t kHalfBack = kCallsAhead / 2;  ///< wait_for_room's second probe, exchanges back
  void publish(uint64_t n, const SlotPlan& plan, const void* data, std::size_t bytes);
  /// After publishing exchange n: the waits and the check for the slots `plan` reads (see exchange()).
  void receive(const Context& c, uint64_t n, const SlotPlan& plan);

  /// What a pending check needs of an exchange: its call's number, its name, and whether it carried a call.
  struct Past {
    uint64_t seq = 0;
    std::string_view what;
    bool checked = false;
  };

  std::unique_ptr<ShmWindows> windows_;
  std::vector<char*> bases_;  ///< every rank's segment, as mapped here (windows_->of(q), looked up once)
  int rank_;
  int size_;
  uint64_t exchanges_ = 0;  ///< exchanges so far; the flag of exchange n is n
  uint64_t verified_ = 0;   ///< every exchange through this one is checked; the later ones are pending
  std::vector<uint64_t> seen_;  ///< per rank, the highest exchange it was seen to have published
  uint64_t next_told_ = 0;     ///< settle() reads the others' agreement lines again from this exchange on (a
                               ///< multiple of kSettleBatch)
  uint64_t last_told_ = 0;     ///< what the last reading of the agreement lines said (Told::through)
  bool rely_on_told_ = false;  ///< the lines moved at their last reading: a later one will cover the pending
                               ///< exchanges beyond `must` (settle)
  uint64_t room_ = kCallsAhead;  ///< exchanges through this one need no wait_for_room (min of seen_ + kCallsAhead)
  Past past_[kSlotDepth];             ///< by exchange % kSlotDepth, for the pending ones
  uint8_t note_ = 0;
  uint8_t notes_ = 0;
  bool read_alike_ = false;  ///< the last exchange compared every call it read with this rank's: all alike (data())
  CallDescriptor cached_call_{};  ///< the last call whose algorithm was looked up, and its row + 1
  uint32_t cached_algorithm_ = 0;
};

}  // namespace dcomm::coll
