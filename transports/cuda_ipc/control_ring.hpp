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

struct ControlRecord {
  enum Kind : uint32_t { kMessage = 1, kAck = 2 };
  uint32_t kind = kMessage;
  uint32_t failed = 0;   ///< acks: the receiver could not copy (its error is in its own log)
  uint64_t seq = 0;      ///< the sender's message number towards this peer; an ack repeats it
  uint64_t tag = 0;
  uint64_t bytes = 0;
  uint64_t base = 0;     ///< the sender's allocation base address: the cache key, and the pointer in-process
  uint64_t offset = 0;   ///< the payload's offset from `base`
  cudaIpcMemHandle_t handle{};
};

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
