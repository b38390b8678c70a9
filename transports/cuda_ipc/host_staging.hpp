#pragma once
// Staging device buffers through pinned host memory, for peers that only a host transport reaches (ucx across
// nodes, or DCOMM_TRANSPORT=shm). A message of n bytes moves as ceil(n / chunk) chunks through `depth` pinned slots,
// so the PCIe copy of one chunk overlaps the network transfer of the previous ones:
//
//   sender:   [D2H chunk 0][D2H chunk 1][D2H chunk 2] ...        DeviceToHostPipeline
//                         [send chunk 0][send chunk 1] ...       (the mesh, over the host transport)
//   receiver:             [recv chunk 0][recv chunk 1] ...       (the mesh, over the host transport)
//                                      [H2D chunk 0][H2D chunk 1] HostToDevicePipeline
//
// The pipelines only move bytes between the device and the slots; which messages carry the chunks (the mesh sends
// them in order on the message's tag; per-(source, tag) ordering keeps them in sequence) is the mesh's business.
// Nothing here blocks: every call polls CUDA events and returns.

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace dcomm::transport::cuda_ipc {

/// A cache of pinned (cudaHostAlloc) chunks of one size, and the non-blocking copy stream of one device. Chunks are
/// allocated on demand and kept for reuse, since cudaHostAlloc costs milliseconds. Thread-safe.
class StagingPool {
 public:
  StagingPool(int device, std::size_t chunk_bytes);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  int device() const { return device_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  void* stream() const { return stream_; }
  void* acquire();
  void release(void* chunk) noexcept;

 private:
  int device_;
  std::size_t chunk_bytes_;
  void* stream_ = nullptr;
  std::mutex mu_;
  std::vector<void*> free_;
  std::vector<void*> all_;
};

/// One chunk of a staged message in its pinned slot.
struct StagedChunk {
  std::size_t index = 0;
  void* host = nullptr;
  std::size_t bytes = 0;
};

/// Sender side: copies `bytes` of device memory at `src` into pinned slots, at most `depth` chunks ahead of sends.
class DeviceToHostPipeline {
 public:
  DeviceToHostPipeline(StagingPool& pool, const void* src, std::size_t bytes, int depth);
  ~DeviceToHostPipeline();
  /// The next chunk, in order, once it is on the host; null while it is still being copied (or all were handed out).
  const StagedChunk* ready();
  /// The host transport is done with chunk `index`: its slot takes the next copy.
  void sent(std::size_t index);
  bool done() const { return sent_ == chunks_; }
  std::size_t chunks() const { return chunks_; }

 private:
  struct Slot;
  void start_copies();
  StagingPool& pool_;
  const char* src_;
  std::size_t bytes_, chunks_;
  std::size_t next_copy_ = 0, next_ready_ = 0, sent_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  StagedChunk current_;
};

/// Receiver side: hands out pinned slots to receive chunks into, and copies each received chunk to `dst`.
class HostToDevicePipeline {
 public:
  HostToDevicePipeline(StagingPool& pool, void* dst, std::size_t bytes, int depth);
  ~HostToDevicePipeline();
  /// A slot for the next chunk to receive, in order; null while every slot is busy (or all chunks were handed out).
  /// `bytes` is the most the chunk may hold.
  const StagedChunk* next_slot();
  /// Chunk `index` has arrived in its slot with `bytes` bytes (the sender's chunk size): queue its copy to the device.
  void received(std::size_t index, std::size_t bytes);
  /// Polls the copies; true once every chunk is in `dst`.
  bool done();
  std::size_t chunks() const { return chunks_; }

 private:
  struct Slot;
  HostToDevicePipeline::Slot& slot_of(std::size_t index);
  StagingPool& pool_;
  char* dst_;
  std::size_t bytes_, chunks_;
  std::size_t next_slot_ = 0, copied_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  StagedChunk current_;
};

}  // namespace dcomm::transport::cuda_ipc
