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
// Two slots are enough: a rank writes a slot again only two exchanges later, and by then it has seen every other
// rank's flag of the exchange in between, which each rank sets only after it has read the others' slots of the
// exchange before. So every exchange waits for every rank, even where the data flows one way (broadcast): that is
// what keeps a fast rank from overwriting a slot a slow one still reads.
//
// With the call check on, every call of the group goes through the slots (the check of an algorithm that moves
// data by messages is one exchange without data), so ranks whose calls differ meet in the same exchange and fail
// alike. With it off (DCOMM_CHECK_CALLS=0) only the slot algorithms use them, and calls that differ time out.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

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

  /// One exchange (see above): publishes this rank's call (`mine`; null when checks are off), or the reason it is
  /// `invalid` (its data is then ignored), and `bytes` (<= kSlotBytes) of `data`; waits for every other rank's slot
  /// of this exchange. With `mine` set, throws the check's InvalidUsageError on every rank alike when any rank's
  /// call is invalid or differs from rank 0's. Then data(q) holds what rank q published, until this rank's next
  /// exchange.
  void exchange(const Context& c, const CallDescriptor* mine, std::string_view invalid, const void* data,
                std::size_t bytes);
  /// What group rank q published in the last exchange; `expected` is the size this rank's call expects of it: a
  /// different size (only when checks are off and the calls differ) throws InvalidUsageError naming q.
  const char* data(const Context& c, int q, std::size_t expected) const;

 private:
  SlotChannel(std::unique_ptr<ShmWindows> windows, int rank, int size);
  char* slot(int q, uint64_t exchange) const;

  std::unique_ptr<ShmWindows> windows_;
  int rank_;
  int size_;
  uint64_t exchanges_ = 0;  ///< exchanges so far; the flag of exchange n is n
  CallDescriptor cached_call_{};  ///< the last call whose algorithm was looked up, and its row + 1
  uint32_t cached_algorithm_ = 0;
};

}  // namespace dcomm::coll
