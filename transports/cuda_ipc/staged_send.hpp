#pragma once
// Device memory that legacy IPC cannot export (cudaMallocAsync pools, cuMemCreate mappings such as PyTorch's
// expandable segments, managed memory) moves through a staging buffer that can: one cudaMalloc'd buffer per
// (sender, receiver) pair, exported once, whose handle the receiver opens once and keeps in its import cache like
// any other allocation. The message moves in chunks through kSlots slots of kChunkBytes:
//
//   A isend      kStaged (seq, tag, bytes) -> B announces it like any message
//   B receive    remembers the destination; kGo (seq) -> A
//   A progress   per free slot: cudaMemcpyAsync (D2D) of the next chunk into the slot on the staging buffer's
//                stream, then an event; once it fired: kChunk (seq, slot, position in the message, bytes) -> B
//   B progress   per kChunk: cudaMemcpyAsync out of the slot (in A's staging buffer, opened once) into the
//                destination on B's copy stream; once done: kSlotFree -> A, and after the last chunk kAck -> A
//   A progress   kSlotFree: the slot takes the next chunk; kAck completes the send as for direct messages
//
// A's copy of chunk k+1 into a slot overlaps B's copy of chunk k out of another. Streaming waits for kGo so that a
// message nobody receives yet cannot hold every slot while the receiver waits for a later message: a message only
// ever occupies slots once its receiver has a destination and keeps draining them.
//
// This file is the sender's side (StagedSender); staged_receive.hpp is the receiver's.

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "transports/cuda_ipc/control_ring.hpp"

namespace dcomm::transport::cuda_ipc {

/// 4 slots of 4 MiB: two chunks in each direction keep both copy engines busy, and 4 MiB copies run near the
/// device's copy bandwidth while 16 MiB of device memory per (sender, receiver) pair stays small.
struct StagingLayout {
  static constexpr std::size_t kSlots = 4;
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;
  static constexpr std::size_t kBufferBytes = kSlots * kChunkBytes;
};

/// Puts a control record into the ring towards `peer` (the transport's post()).
using PostRecord = std::function<void(int peer, const ControlRecord& rec)>;
/// Fails the send `seq` to `peer` (the transport owns the send's Op).
using FailSend = std::function<void(int peer, uint64_t seq, std::exception_ptr error)>;

class StagedSender {
 public:
  StagedSender(int self_rank, int world_size, PostRecord post);
  ~StagedSender() { close(); }
  StagedSender(const StagedSender&) = delete;
  StagedSender& operator=(const StagedSender&) = delete;

  /// Takes message `seq` of `bytes` (> 0) at `src` on `device` to `peer`; the caller then posts its kStaged record.
  /// The first staged send to a peer allocates and exports its staging buffer, on `device` (later sends from other
  /// devices copy into it peer to peer); throws CudaError when that fails, before the message exists.
  void add(int peer, uint64_t seq, const void* src, std::size_t bytes, int device);
  /// kGo: the receiver has a destination for `seq`; its chunks follow those of messages that got kGo earlier.
  void go(int peer, uint64_t seq);
  /// kSlotFree: the receiver is done with the slot at `offset` in the staging buffer.
  void slot_free(int peer, uint64_t offset);
  /// The send ended (acked, failed or discarded): no more chunks of it. Never throws.
  void forget(int peer, uint64_t seq) noexcept;
  /// Posts the chunks whose copy into staging finished and fills free slots. A copy that fails fails its send
  /// through `fail` and tells the receiver (kCancel). Returns whether anything happened.
  bool progress(const FailSend& fail);
  /// Waits for this side's copies (device work, which always ends) and frees the staging buffers and streams.
  /// Never throws.
  void close() noexcept;

 private:
  enum class SlotState { kFree, kCopying, kPosted };
  struct Slot {
    cudaEvent_t event = nullptr;
    SlotState state = SlotState::kFree;
    uint64_t seq = 0;
    uint64_t position = 0;
    std::size_t bytes = 0;
  };
  struct Send {
    const char* src;
    std::size_t bytes;
    std::size_t next = 0;  // where the next chunk to copy starts
  };
  struct Channel {  // towards one peer
    int device = -1;
    cudaStream_t stream = nullptr;  // this channel's copies into staging (non-blocking: never behind stream 0)
    void* buffer = nullptr;
    cudaIpcMemHandle_t handle{};
    std::array<Slot, StagingLayout::kSlots> slots;
    std::map<uint64_t, Send> sends;  // staged sends not ended yet, by seq
    std::deque<uint64_t> streaming;  // seqs that got kGo and still have chunks to copy, in kGo order
  };

  Channel& channel(int peer, int device);
  Channel* find(int peer) noexcept;  // null until the first staged send to `peer`
  bool post_copied(int peer, Channel& c, const FailSend& fail);
  bool fill_slots(int peer, Channel& c, const FailSend& fail);
  void abort_send(int peer, uint64_t seq, std::exception_ptr error, const FailSend& fail);

  int self_;
  PostRecord post_;
  std::vector<std::unique_ptr<Channel>> channels_;  // by peer; null until the first staged send to it
};

}  // namespace dcomm::transport::cuda_ipc
