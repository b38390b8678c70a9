// Scratch memory on the call's device, kept for reuse: malloc'd blocks per thread for host buffers, cudaMalloc'd
// blocks per device for device buffers (collectives/cuda/device_blocks.hpp). Device scratch must not come from the
// stream-ordered allocator (cudaMallocAsync): algorithms send from their scratch, and the cuda_ipc transport can
// hand a peer only memory that cudaIpcGetMemHandle exports, which pool memory is not. The device cache keeps
// cudaMalloc and cudaFree, which may synchronise the device, out of all but the first calls of each size.

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/device_support.hpp"
#include "common/deadline.hpp"

#if DCOMM_CUDA_REDUCE
#include "collectives/cuda/device_blocks.hpp"
#endif

namespace dcomm::coll {

namespace {

// Host scratch is kept for reuse, a few blocks per thread: a large malloc is a fresh mmap whose every page faults
// in (and is zeroed) on first touch, which cost a third of a 64 MiB all_reduce. A thread keeps at most
// kCachedBlocks blocks and kCachedBytes in all, and frees them when it exits.
constexpr std::size_t kCachedBlocks = 4;
constexpr std::size_t kCachedBytes = std::size_t{512} << 20;

struct HostBlockCache {
  std::vector<std::pair<std::size_t, char*>> blocks;  // (capacity, memory)
  std::size_t total = 0;
  ~HostBlockCache() {
    for (auto& b : blocks) std::free(b.second);
  }
  /// The smallest cached block of at least `bytes`, or null.
  char* take(std::size_t bytes, std::size_t* capacity) {
    auto best = blocks.end();
    for (auto it = blocks.begin(); it != blocks.end(); ++it) {
      if (it->first >= bytes && (best == blocks.end() || it->first < best->first)) best = it;
    }
    if (best == blocks.end()) return nullptr;
    char* p = best->second;
    *capacity = best->first;
    total -= best->first;
    blocks.erase(best);
    return p;
  }
  void give(char* p, std::size_t capacity) {
    if (capacity > kCachedBytes) {
      std::free(p);
      return;
    }
    blocks.emplace_back(capacity, p);
    total += capacity;
    // Over the limits: drop the smallest blocks first, keeping the large ones that are costly to fault in.
    while (blocks.size() > kCachedBlocks || total > kCachedBytes) {
      auto smallest = std::min_element(blocks.begin(), blocks.end());
      total -= smallest->first;
      std::free(smallest->second);
      blocks.erase(smallest);
    }
  }
};

HostBlockCache& host_cache() {
  thread_local HostBlockCache cache;
  return cache;
}

[[noreturn]] void throw_no_memory(std::size_t bytes) {
  throw SystemError(
      fmt::format("allocating {} of scratch memory ({} bytes) failed; is the count right?", format_bytes(bytes), bytes),
      ENOMEM);
}

void release(char* data, std::size_t bytes, const Device& device) noexcept {
  if (data == nullptr) return;
#if DCOMM_CUDA_REDUCE
  if (!device.is_host()) {
    give_device_block(device.index, data, bytes);
    return;
  }
#endif
  (void)device;
  try {
    host_cache().give(data, bytes);
  } catch (...) {
    std::free(data);  // the cache could not grow its list: just free
  }
}

}  // namespace

Scratch::Scratch(std::size_t bytes, const Device& device) : device_(device) {
  if (bytes == 0) return;
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    data_ = static_cast<char*>(take_device_block(device.index, bytes, &bytes_));
    return;
#else
    throw InvalidUsageError(fmt::format(
        "collectives: scratch memory on {} needs the CUDA reductions, which this build lacks; pass host buffers",
        to_string(device)));
#endif
  }
  data_ = host_cache().take(bytes, &bytes_);
  if (data_ != nullptr) return;
  data_ = static_cast<char*>(std::malloc(bytes));
  if (data_ == nullptr) throw_no_memory(bytes);
  bytes_ = bytes;
}

void probe_host_memory(std::size_t bytes) {
  // A block this large is mapped on its own and unmapped by free(): no page is touched, and the cache is left alone.
  void* p = std::malloc(bytes);
  if (p == nullptr) throw_no_memory(bytes);
  std::free(p);
}

Scratch::Scratch(Scratch&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), device_(other.device_) {}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    release(data_, bytes_, device_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

Scratch::~Scratch() { release(data_, bytes_, device_); }

}  // namespace dcomm::coll
