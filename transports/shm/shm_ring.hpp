#pragma once
// A lock-free single-producer single-consumer ring of records in shared memory. The producer is the peer that
// sends, the consumer the rank that owns the segment the ring lives in. Head and tail are monotonic 64-bit byte
// counts on their own cache lines; a record never wraps: when one does not fit before the end, the producer
// writes a pad record and starts again at offset 0. Records are 64-byte aligned and at most half the ring, so
// a record always fits once the consumer catches up.
//
// Records of one line (a header alone, or an eager message of up to kInlineBytes, its payload in the header's
// line: the words a large message's header uses) go in a lane of kLaneBytes before the ring, whose few lines stay
// in the two cores' caches; the others, and one-line records that find the lane full, go in the ring. Every record
// takes the producer's next sequence number, and the consumer takes them in that order from either place, so the
// sender's order holds.
//
// The consumer learns of a record from the record itself, not from a counter: the header's last word, its stamp,
// is written last (a release store) and names the record's sequence number mixed with the ring's key, so a line
// left from an earlier lap, or a line of an earlier record's payload, never reads as the next record (a payload
// word would have to equal a 64-bit value keyed per ring). An 8-byte message is then one cache line from core to
// core, and a line that was in cache: with head as the signal it was head's line, then the header's and the
// payload's, in a ring of 1 MiB whose lines are cold when they come round. A ping-pong of two processes on bare
// rings, one way: 0.104-0.109 us before, 0.079-0.086 with the lane (0.050 for a single line written in place).

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/shm/shm_split.hpp"

namespace dcomm::transport::shm {

enum class RecordKind : uint32_t {
  kPad = 0,    ///< skip to the start of the ring
  kEager,      ///< a small message; payload follows
  kRts,        ///< a large message: tag, bytes, msg_id, and the sender's address for CMA
  kAck,        ///< receiver to sender: the large message msg_id was read or discarded; the send is complete
  kCts,        ///< receiver to sender: stream the large message msg_id through the ring; offset 1: the receiver
               ///< may pull the rest itself (CMA) when the stream stalls, so the send completes at its kAck
  kData,       ///< a piece of a streamed message: msg_id, offset, len; payload follows; tag: the nanoseconds the
               ///< producer's copy of the payload into the ring took (Ring::try_write writes it)
  kStop,       ///< receiver to sender: stop streaming msg_id, the receiver reads the rest itself; kAck follows
  kSplit,      ///< receiver to sender: help copy msg_id (shm_split.hpp): addr = the receiver's destination,
               ///< offset = the board's generation; the receiver's kAck follows when it is done reading
};

struct RecordHeader {
  RecordKind kind = RecordKind::kPad;
  uint32_t flags = 0;   ///< kInlinePayload: an eager record's payload is in msg_id..offset (Ring::payload)
  uint64_t tag = 0;
  uint64_t bytes = 0;   ///< the whole message's size
  uint64_t msg_id = 0;  ///< per sender, names a large message in kRts / kAck / kCts / kData
  uint64_t addr = 0;    ///< kRts: the payload's address in the sender's process
  uint64_t offset = 0;  ///< kData: where this piece goes
  uint64_t len = 0;     ///< bytes of payload in this record
  uint64_t stamp = 0;   ///< written last by the ring (try_write): the record is there (see above)
};
inline constexpr std::size_t kRecordAlign = 64;
static_assert(sizeof(RecordHeader) == kRecordAlign, "a record header is one cache line, its stamp the last word");
inline constexpr uint32_t kInlinePayload = 1;
/// An eager record's payload of up to this many bytes travels in its header's line.
inline constexpr std::size_t kInlineBytes = offsetof(RecordHeader, len) - offsetof(RecordHeader, msg_id);

/// The one-line records' lane of a ring (see above).
inline constexpr uint64_t kLaneBytes = 4096;

/// The shared part of a ring: two cache lines of counters and the pair's split board, then the lane's kLaneBytes
/// and `capacity` bytes of records.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  ///< bytes the producer has written (the producer's own count)
  std::atomic<uint64_t> lane_head;         ///< the same in the lane
  std::atomic<uint64_t> seq;               ///< the producer's next record's number
  uint64_t key;                            ///< mixed into every stamp; set by init(), read by each side once
  alignas(64) std::atomic<uint64_t> tail;  ///< bytes the consumer has released
  std::atomic<uint64_t> lane_tail;         ///< the same in the lane
  std::atomic<uint64_t> next;              ///< the number of the consumer's next record
  alignas(64) SplitBoard split;            ///< the producer's message being read by both sides (shm_split.hpp)
};
inline constexpr std::size_t kRingControlBytes = sizeof(RingControl);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "ring counters must be lock-free across processes");

/// A view of one ring, held by the producer or the consumer.
class Ring {
 public:
  Ring() = default;
  /// `base` points at the RingControl; the lane and the records follow it. `capacity` is a multiple of kRecordAlign.
  Ring(void* base, uint64_t capacity);
  /// Zeroes the counters and draws the stamps' key; the segment's owner calls it once, before anyone else maps the
  /// segment (a Ring made after it reads the key).
  void init();
  /// Maps every page of the ring into this process now, without changing its contents. A page first touched
  /// in the middle of a message costs a fault (several µs on a VM): one in every few thousand small messages,
  /// which is what a latency's 99th percentile sees. The transport calls it on a ring's first use.
  void prefault() const noexcept;

  /// The most payload one record may carry.
  uint64_t max_payload() const { return capacity_ / 2 - kRecordAlign; }
  /// Producer: appends a record; false when there is no room now.
  bool try_write(const RecordHeader& h, const void* payload);
  /// Consumer: the next record, or null when the ring is empty. Valid until pop().
  const RecordHeader* peek();
  const char* payload(const RecordHeader* h) const {
    return reinterpret_cast<const char*>(h) +
           ((h->flags & kInlinePayload) != 0 ? offsetof(RecordHeader, msg_id) : kRecordAlign);
  }
  void pop();
  /// The board of the split reads of the producer's messages: set up by the consumer, claimed by both.
  SplitBoard& split() const { return ctl_->split; }

  static uint64_t record_bytes(uint64_t len) { return (kRecordAlign + len + kRecordAlign - 1) / kRecordAlign * kRecordAlign; }
  /// The bytes a record takes in the ring: one line when its payload is inline.
  static uint64_t record_bytes(const RecordHeader& h) {
    return (h.flags & kInlinePayload) != 0 ? kRecordAlign : record_bytes(h.len);
  }

 private:
  RingControl* ctl_ = nullptr;
  char* lane_ = nullptr;
  char* data_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t cached_tail_ = 0;       ///< producer: the last tail seen, so most writes skip reading the shared line
  uint64_t cached_lane_tail_ = 0;  ///< the same for the lane
  uint64_t key_ = 0;               ///< ctl_->key, read once
  bool in_lane_ = false;           ///< consumer: the record peek() returned is the lane's
  /// The stamp of record number `seq`.
  uint64_t stamp_of(uint64_t seq) const { return (seq + 1) ^ key_; }  ///< producer: the last tail seen, so most writes skip reading the shared line
};

}  // namespace dcomm::transport::shm
