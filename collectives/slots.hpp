#pragma once
// Slots: small collectives and the call check through shared memory, for groups on one node. Every rank owns two
// slots (one per parity of the exchange count) in a segment every other rank of the group maps. One exchange:
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
// non-roots read the root's slot alone. Such a rank has not seen every rank's call, so it checks the exchange at
// its next one (the "pending" check, settle()): it waits for every rank's flag of the last exchange and compares
// every rank's call, before it publishes anything new.
//
// Two slots are enough, and the flags are the acknowledgements: a rank publishes exchange n into the slot of
// exchange n-2 only after it has seen every other rank's flag of exchange n-1 (during n-1, or in the pending check
// at the start of n), and a rank sets its flag of n-1 only after it has finished every read of n-2 (its data and
// its own pending check). So a sender runs at most one call ahead of the slowest rank (flow control one call
// deep), and nothing is overwritten while a rank still reads it. Every rank publishes its call in every exchange,
// even where nobody needs its data, so any rank can always see every rank's call.
//
// The check's semantics (docs/errors.md#mismatched-calls-through-the-slots): a rank that reads another's data
// compares that rank's call with its own first; on any difference it waits for every rank's slot and throws the
// check's error (the lowest invalid or mismatched rank), so no rank consumes the data of another call. A rank that
// returned before seeing every call (a sender, a reader of the root alone) learns of a mismatch at its next call
// on the group, or at the group's barrier or destruction (logged): that next call then fails on this rank with the
// earlier call's error, and this rank publishes it as a "late notice" in place of its call, so every rank that
// reads this rank's part of that call fails it too, naming this rank; ranks that do not read it are not held up
// (they learned of the earlier failure themselves). The pending check ignores late notices: the failure they
// report is already known to every rank, so it is reported once per rank, not in a cascade.
//
// With the call check on, every call of the group goes through the slots (the check of an algorithm that moves
// data by messages is one exchange without data), so ranks whose calls differ meet in the same exchange and fail
// alike. With it off (DCOMM_CHECK_CALLS=0) only the slot algorithms use them, and calls that differ time out.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "collectives/call_check.hpp"
#include "collectives/context.hpp"
#include "collectives/registry.hpp"

namespace dcomm::coll {

/// The most data one rank's slot carries; larger calls take algorithms that send messages.
inline constexpr std::size_t kSlotBytes = 4096;

class ShmWindows;

/// Whether <collective>[slot] (algorithms/slot.cpp) moves this call through the group's slots; where not, it runs
/// the check and then slot_fallback().
bool slots_take(const Args& args, const GroupView& view);
const Algorithm& slot_fallback(Collective c);

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

  /// One exchange (see above): first the pending check of the last exchange, if this rank returned from it before
  /// seeing every call; then publishes this rank's call (`mine`; null when checks are off), or the reason it is
  /// `invalid` (its data is then ignored; it reads every slot), and `bytes` (<= kSlotBytes) of `data`; waits for
  /// the slots it `reads`. With `mine` set, throws the check's InvalidUsageError when a rank it read (or, with
  /// kReadAll, any rank) is invalid or differs. Then data(q) holds what rank q published, for the ranks read,
  /// until this rank's next exchange. `c.what` must outlive the group (the engine's per-algorithm name).
  void exchange(const Context& c, const CallDescriptor* mine, std::string_view invalid, const void* data,
                std::size_t bytes, int reads = kReadAll);
  /// The pending check, if any, bounded by `deadline`; for the group's destruction (`view`: the group's). Never
  /// throws: a mismatch or a failure is logged.
  void settle_quietly(const GroupView& view, const Deadline& deadline) noexcept;
  /// What group rank q published in the last exchange; `expected` is the size this rank's call expects of it: a
  /// different size (only when checks are off and the calls differ) throws InvalidUsageError naming q.
  const char* data(const Context& c, int q, std::size_t expected) const;

 private:
  SlotChannel(std::unique_ptr<ShmWindows> windows, int rank, int size);
  char* slot(int q, uint64_t exchange) const {
    return bases_[static_cast<std::size_t>(q)] + (exchange % 2) * stride_;
  }
  /// Waits for every other rank's flag of exchange n (call `seq`).
  void wait_all(const Context& c, uint64_t n, uint64_t seq) const;
  /// The check over every rank's slot of exchange n: throws on an invalid, check-off or mismatched call.
  /// `late_notices`: a late notice counts as an invalid call (else it is left out of the comparison).
  void verdict(const Context& c, uint64_t n, bool late_notices) const;
  /// Whether every rank's slot of exchange n holds a call equal to this rank's (the check's fast path).
  bool all_agree(uint64_t n) const;
  /// The pending check of the last exchange, at the start of exchange n + 1 (see above).
  void settle(const Context& c, const CallDescriptor* mine);
  void publish(uint64_t n, uint8_t state, const CallDescriptor* mine, const void* data, std::size_t bytes);

  std::unique_ptr<ShmWindows> windows_;
  std::vector<char*> bases_;  ///< every rank's segment, as mapped here (windows_->of(q), looked up once)
  std::size_t stride_;        ///< from one slot to the next in a segment
  int rank_;
  int size_;
  uint64_t exchanges_ = 0;  ///< exchanges so far; the flag of exchange n is n
  /// The last exchange waits for its check (this rank returned before seeing every rank's call): that call's
  /// number, its name, and whether it carried a call (checks on).
  bool pending_ = false;
  bool pending_checked_ = false;
  uint64_t pending_seq_ = 0;
  std::string_view pending_what_;
  CallDescriptor cached_call_{};  ///< the last call whose algorithm was looked up, and its row + 1
  uint32_t cached_algorithm_ = 0;
};

}  // namespace dcomm::coll
