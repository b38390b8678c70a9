#include "collectives/cuda/device_blocks.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::coll {
namespace {

using Limits = DeviceBlockLimits;

struct Block {
  std::size_t capacity;
  void* ptr;
};

// The cached blocks of every device. CUDA calls happen outside the lock: cudaMalloc and cudaFree can take
// milliseconds, and other threads' collectives should not wait for them to find a cached block.
class DeviceBlocks {
 public:
  /// The smallest cached block of at least `bytes` on `device`, taken out of the cache; null when none fits.
  void* take(int device, std::size_t bytes, std::size_t* capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Block>& blocks = cached_[device];
    auto best = blocks.end();
    for (auto it = blocks.begin(); it != blocks.end(); ++it) {
      if (it->capacity >= bytes && (best == blocks.end() || it->capacity < best->capacity)) best = it;
    }
    if (best == blocks.end()) return nullptr;
    *capacity = best->capacity;
    void* p = best->ptr;
    blocks.erase(best);
    return p;
  }

  /// Keeps `block` and returns the blocks to free (outside the lock) so that the cache stays within its limits:
  /// the smallest go first, keeping the large ones whose cudaMalloc is dearest. May throw std::bad_alloc.
  std::vector<Block> give(int device, Block block) {
    std::vector<Block> evicted;
    if (block.capacity > Limits::kMaxBytes) {
      evicted.push_back(block);
      return evicted;
    }
    // The cache holds at most kMaxBlocks, so at most kMaxBlocks + 1 go: reserved before the block joins the cache,
    // so that nothing after that can throw and leave it both cached and freed by the caller.
    evicted.reserve(Limits::kMaxBlocks + 1);
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Block>& blocks = cached_[device];
    blocks.push_back(block);
    auto total = [&blocks] {
      std::size_t sum = 0;
      for (const Block& b : blocks) sum += b.capacity;
      return sum;
    };
    while (blocks.size() > Limits::kMaxBlocks || total() > Limits::kMaxBytes) {
      auto smallest = std::min_element(blocks.begin(), blocks.end(),
                                       [](const Block& a, const Block& b) { return a.capacity < b.capacity; });
      evicted.push_back(*smallest);
      blocks.erase(smallest);
    }
    return evicted;
  }

  /// Empties `device`'s cache; the caller frees what it returns.
  std::vector<Block> drain(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(cached_[device], {});
  }

  DeviceBlockStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceBlockStats s;
    for (const Block& b : cached_[device]) {
      ++s.blocks;
      s.bytes += b.capacity;
    }
    return s;
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<Block>> cached_;
};

DeviceBlocks& cache() {
  static DeviceBlocks* const blocks = new DeviceBlocks;  // never destroyed (device_blocks.hpp says why)
  return *blocks;
}

void free_blocks(int device, const Block* blocks, std::size_t n) noexcept {
  if (n == 0) return;
  try {
    cuda::DeviceGuard guard(device);
    for (std::size_t i = 0; i < n; ++i) (void)cudaFree(blocks[i].ptr);
  } catch (...) {
    // No usable device any more: the process is going down, and the driver reclaims the memory with it.
  }
  (void)cudaGetLastError();
}

std::size_t rounded(std::size_t bytes) {
  if (bytes == 0) return Limits::kGranularity;
  if (bytes > std::numeric_limits<std::size_t>::max() - Limits::kGranularity) return bytes;  // cudaMalloc refuses
  return (bytes + Limits::kGranularity - 1) / Limits::kGranularity * Limits::kGranularity;
}

}  // namespace

void* take_device_block(int device, std::size_t bytes, std::size_t* capacity) {
  if (void* p = cache().take(device, bytes, capacity)) return p;
  const std::size_t size = rounded(bytes);
  cuda::DeviceGuard guard(device);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    // Cached blocks too small for this request may be what fills the device: free them and try once more.
    std::vector<Block> drained = cache().drain(device);
    if (!drained.empty()) {
      DCOMM_DEBUG("collectives: cuda:{} out of memory for {} of scratch; freeing {} cached block(s) and retrying",
                  device, format_bytes(size), drained.size());
      free_blocks(device, drained.data(), drained.size());
      err = cudaMalloc(&p, size);
    }
  }
  cuda::check(err, fmt::format("collectives: cudaMalloc of {} of scratch on cuda:{} (scratch must come from "
                               "cudaMalloc so that peers can open it; free device memory, or use smaller "
                               "messages)", format_bytes(size), device));
  *capacity = size;
  return p;
}

void give_device_block(int device, void* block, std::size_t capacity) noexcept {
  if (block == nullptr) return;
  const Block returned{capacity, block};
  try {
    std::vector<Block> evicted = cache().give(device, returned);
    free_blocks(device, evicted.data(), evicted.size());
  } catch (...) {
    free_blocks(device, &returned, 1);  // the cache could not grow its list: free this one
  }
}

DeviceBlockStats device_block_stats(int device) { return cache().stats(device); }

}  // namespace dcomm::coll
