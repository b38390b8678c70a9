#pragma once
// Device scratch that other processes can open: blocks from cudaMalloc, kept per device for reuse (built with
// DCOMM_HAVE_CUDA; a plain C++ header).
//
// Why not the stream-ordered allocator (alloc_cuda): algorithms send from their scratch, and the cuda_ipc
// transport exports the sender's allocation with cudaIpcGetMemHandle, which refuses cudaMallocAsync pool memory.
// cudaMalloc'd memory exports, and a block that is kept keeps its handle, so a peer opens it once (its import cache
// is keyed by base address and handle) rather than once per call.
//
// The price: cudaMalloc and cudaFree may synchronise the whole device, and so wait behind a stream-gate kernel
// (runtime/cuda/stream_order.hpp) that waits for a collective that has not finished. With the cache they are rare:
// cudaMalloc runs only when no cached block fits, and cudaFree only when a returned block would put the cache over
// its limits (kMaxBlocks blocks, kMaxBytes bytes per device; a block larger than kMaxBytes is never kept) or when a
// cudaMalloc ran out of memory and the cache is emptied to retry once. Otherwise blocks live until the process
// exits, when the driver reclaims them: the cache is never destroyed, so no CUDA call runs in a static destructor,
// after the CUDA runtime may have unloaded.

#include <cstddef>

namespace dcomm::coll {

struct DeviceBlockLimits {
  static constexpr std::size_t kGranularity = std::size_t{2} << 20;  ///< sizes round up to 2 MiB (the GPU's page)
  static constexpr std::size_t kMaxBlocks = 8;                       ///< per device
  static constexpr std::size_t kMaxBytes = std::size_t{2} << 30;     ///< per device
};

/// A block of at least `bytes` (> 0) on `device`: the smallest cached one that fits, else a new cudaMalloc.
/// `*capacity` receives its size, which give_device_block needs back. Throws CudaError when the device is out of
/// memory even after the cache was emptied.
void* take_device_block(int device, std::size_t bytes, std::size_t* capacity);

/// Returns a block to `device`'s cache once no device work uses it any more (the collectives' device operations
/// wait for their work before returning). Never throws.
void give_device_block(int device, void* block, std::size_t capacity) noexcept;

/// How many blocks and bytes `device`'s cache holds now (tests).
struct DeviceBlockStats {
  std::size_t blocks = 0;
  std::size_t bytes = 0;
};
DeviceBlockStats device_block_stats(int device);

}  // namespace dcomm::coll
