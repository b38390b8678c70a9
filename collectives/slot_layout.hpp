#pragma once
// The layout of a group's shared-memory slot segments (slots.hpp) and the few reads of them that the exchange
// (slots.cpp) and the pending checks (slot_checks.cpp) share. Internal to the slots.

#include <fmt/format.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "collectives/registry.hpp"
#include "collectives/slots.hpp"

namespace dcomm::coll::slot_layout {

// A CallDescriptor with the algorithm as its row in the table instead of its name: 24 bytes, so that the flag, the
// call and the first 24 bytes of data share one cache line.
struct SlotCall {
  uint8_t collective = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t vector_variant = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint32_t algorithm = 0;  ///< algorithm_index() + 1; 0: none (an invalid call's)
  uint32_t device = 0;     ///< CallDescriptor::device
  bool operator==(const SlotCall&) const = default;
};

// kLateNotice: this rank learned at this exchange that its last call failed the check (slots.hpp); the data is
// the reason.
enum class SlotState : uint8_t { kCall, kInvalid, kNoCall, kLateNotice };

// The head of a slot, one cache line with the first kInlineBytes of data at kDataOffset (SlotChannel::slot_data).
struct SlotHead {
  std::atomic<uint64_t> flag;  ///< the number of the exchange the slot holds, stored last
  uint32_t bytes;              ///< the data's size, or the invalid reason's
  SlotState state;
  uint8_t note;  ///< SlotChannel::set_note(): outside the call, not compared
  uint8_t unused[2];
  SlotCall call;
};
inline constexpr std::size_t kDataOffset = sizeof(SlotHead);
static_assert(kDataOffset + SlotChannel::kInlineBytes == SlotChannel::kHeadStride,
              "the head and its inline data fill one cache line (slots.hpp)");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slot flags must be lock-free across processes");
// What a rank that read every slot tells the ranks that did not (SlotChannel::settle): lines of its own, after its
// data areas, written by this rank alone. `agreed`: the newest exchange at which this rank read every rank's call and
// found all of them alike and valid, with every earlier exchange checked too (stored with release, after `failed`).
// `failed`: the exchange at which this rank last met a failed check of any exchange (its own call's, a pending one's,
// or one whose calls it read and found different or not checked), 0 for none.
// By blocks of kSettleBatch exchanges, `agreed` goes to two lines by turns (exchange n's to by_block[(n /
// kSettleBatch) % 2]; `failed` to both), so that a rank reading it can take the line of the block before last, which
// its writer has finished with: fetched a call early and found unchanged (a line its writer rewrites at every call
// crossed cores at every reading: the 8 B sender's slowest call in eight). 128 bytes apart: the core's prefetcher
// fetches lines in pairs, and would fetch the line being written with the one read.
struct alignas(2 * SlotChannel::kHeadStride) AgreedLine {
  std::atomic<uint64_t> agreed;
  std::atomic<uint64_t> failed;
};
struct Agreement {
  AgreedLine by_block[2];
};
// Every rank's segment: the heads, then the data areas (page-aligned: the heads fill whole pages), then its agreement.
inline constexpr std::size_t kAgreementOffset = SlotChannel::kHeadsBytes + kSlotDepth * kSlotBytes;
inline constexpr std::size_t kSegmentBytes = kAgreementOffset + sizeof(Agreement);
static_assert(sizeof(Agreement) == 4 * SlotChannel::kHeadStride && std::atomic<uint64_t>::is_always_lock_free);

// The line exchange n's `agreed` goes to; a reader at exchange x (a multiple of kSettleBatch) takes agreed_line(x):
// the line of block x / kSettleBatch - 2, the writer being in block x / kSettleBatch - 1 when it runs behind by 1 to
// kSettleBatch exchanges. Another line, or one still written, would be as right (`agreed` only grows), only slower.
inline AgreedLine& agreed_line(Agreement& a, uint64_t n) { return a.by_block[(n / kSettleBatch) & 1]; }

// A call as its slot holds it (compact) and back (expand: the algorithm's name from its row).
inline SlotCall compact(const CallDescriptor& d, uint32_t algorithm) {
  return SlotCall{.collective = d.collective, .dtype = d.dtype, .op = d.op, .vector_variant = d.vector_variant,
                  .root = d.root, .count = d.count, .algorithm = algorithm, .device = d.device};
}

inline CallDescriptor expand(const SlotCall& s) {
  CallDescriptor d;
  d.collective = s.collective;
  d.dtype = s.dtype;
  d.op = s.op;
  d.vector_variant = s.vector_variant;
  d.root = s.root;
  d.count = s.count;
  d.device = static_cast<uint8_t>(s.device);
  const auto& table = algorithm_table();
  if (s.algorithm > 0 && s.algorithm <= table.size()) {
    std::strncpy(d.algorithm, table[s.algorithm - 1].name, sizeof d.algorithm - 1);
  }
  return d;
}

inline const SlotHead& head(const char* slot) { return *reinterpret_cast<const SlotHead*>(slot); }
inline Agreement& agreement(char* base) { return *reinterpret_cast<Agreement*>(base + kAgreementOffset); }

// a == b, as three words (the check's fast path runs on every call; memcmp is a library call).
inline bool same_call(const SlotCall& a, const SlotCall& b) {
  static_assert(sizeof(SlotCall) == 3 * sizeof(uint64_t) && alignof(SlotCall) >= alignof(uint32_t));
  uint64_t x[3], y[3];
  std::memcpy(x, &a, sizeof x);
  std::memcpy(y, &b, sizeof y);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0;
}

// What Mesh::wait_until polls: one rank's flag.
struct Awaited {
  const SlotHead* head;
  uint64_t exchange;
  int rank;
  uint64_t seq;
};

inline bool flag_set(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  return a->head->flag.load(std::memory_order_acquire) == a->exchange;
}

inline std::string describe(const void* arg) {
  const auto* a = static_cast<const Awaited*>(arg);
  return fmt::format("the shared-memory slot of rank {} for call #{} of this group", a->rank, a->seq);
}

inline int world_rank(const GroupView& v, int q) {
  return v.world_ranks.empty() ? q : v.world_ranks[static_cast<std::size_t>(q)];
}

}  // namespace dcomm::coll::slot_layout
