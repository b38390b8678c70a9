#pragma once
// The cuda_ipc transport's control channel: small fixed-size records in POSIX shared memory. Every rank owns one
// segment holding one single-producer single-consumer ring per possible writer: ring[s] of rank r's segment carries
// records from rank s to rank r. The payload never passes through here; only the IPC handle that lets the receiver
// copy it straight out of the sender's device memory, and the acknowledgement that lets the sender reuse it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.hpp"

namespace dcomm::transport::cuda_ipc {

/// One control message. Direct messages (exportable memory) use kMessage and kAck only; memory that legacy IPC
/// cannot export moves through the sender's staging buffer (staged_send.hpp) with the other kinds:
///   A -> B kStaged   seq, tag, bytes: announces the message, like kMessage without a handle
///   B -> A kGo       seq: B has a destination (receive() was called); A may stream the message
///   A -> B kChunk    seq, bytes, position (offset in the message), base + handle (A's staging allocation), offset
///                    (the slot's offset in it): the chunk is in that slot
///   B -> A kSlotFree offset: B copied the slot out (or dropped it); A may refill it
///   B -> A kAck      seq, failed: as for direct messages, once every chunk is in the destination
///   A -> B kCancel   seq: A could not copy its buffer into staging; B fails the receive
struct ControlRecord {
  enum Kind : uint32_t { kMessage = 1, kAck = 2, kStaged = 3, kGo = 4, kChunk = 5, kSlotFree = 6, kCancel = 7 };
  uint32_t kind = kMessage;
  uint32_t failed = 0;    ///< acks: the receiver could not copy (its error is in its own log)
  uint64_t seq = 0;       ///< the sender's message number towards this peer; acks and staging records repeat it
  uint64_t tag = 0;
  uint64_t bytes = 0;     ///< the message's size; in a kChunk, the chunk's
  uint64_t base = 0;      ///< the sender's allocation base address: the cache key, and the pointer in-process
  uint64_t offset = 0;    ///< the payload's offset from `base` (kChunk, kSlotFree: the slot's)
  uint64_t position = 0;  ///< kChunk: where the chunk goes in the message
  cudaIpcMemHandle_t handle{};
};
// Both sides of a ring are built from this header, but a record layout that changes size by accident would still
// break a mixed build silently; 120 bytes keeps 64 records in under 8 KiB per ring.
static_assert(sizeof(ControlRecord) == 120, "control records are 120 bytes");

/// One ring of kSlots records. head and tail count records ever written and read; they live on separate cache
/// lines so the two processes do not share one.
struct Ring {
  static constexpr uint64_t kSlots = 64;
  alignas(64) uint64_t head;
  alignas(64) uint64_t tail;
  ControlRecord slots[kSlots];
};

/// Appends `rec`; false when the ring is full (the reader is behind).
bool ring_push(Ring& ring, const ControlRecord& rec) noexcept;
/// Takes the oldest record; false when there is none.
bool ring_pop(Ring& ring, ControlRecord* rec) noexcept;

/// A mapped segment of `rings` rings. The creator unlinks the name when it is destroyed.
class ControlSegment {
 public:
  ControlSegment() = default;
  /// Creates (and zeroes) this rank's segment; throws SystemError naming the segment.
  static ControlSegment create(const std::string& name, int rings);
  /// Maps a peer's segment, which the peer created before publishing its name.
  static ControlSegment open(const std::string& name, int rings);
  ControlSegment(ControlSegment&& other) noexcept;
  ControlSegment& operator=(ControlSegment&& other) noexcept;
  ~ControlSegment();

  Ring& ring(int writer) const { return static_cast<Ring*>(base_)[writer]; }
  const std::string& name() const { return name_; }

 private:
  void release() noexcept;
  std::string name_;
  void* base_ = nullptr;
  std::size_t size_ = 0;
  bool owner_ = false;
};

}  // namespace dcomm::transport::cuda_ipc
