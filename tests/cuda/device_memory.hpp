#pragma once
// Test helpers: owned device allocations and copies, failing the test loudly on any CUDA error.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::test {

/// Waits until what this thread queued on the legacy default stream has landed. A cudaMemcpy from pageable host
/// memory to the device returns once the bytes are staged, before the DMA into device memory ends, and a cudaMemset
/// of device memory returns at once; transports copy on their own non-blocking streams, which do not wait for the
/// legacy stream, so a test that hands a buffer to a transport right after either could have it read (or
/// overwritten by the late memset) out of order. Seen on an H100 with two test programs sharing the GPU
/// (2026-11-27): "byte 0 differs from what was sent". The process group orders such work itself
/// (CollectiveOptions::stream, P2POptions::stream: a null stream is the legacy default stream).
inline void settle_legacy_stream() { cuda::check(cudaStreamSynchronize(cudaStreamLegacy), "test: legacy stream"); }

/// Where a DeviceMemory comes from: cudaMalloc (exportable with legacy IPC) or the device's default stream-ordered
/// pool (cudaMallocAsync, which legacy IPC cannot export: cuda_ipc stages it).
enum class Allocator { kMalloc, kPool };

class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes, Allocator from = Allocator::kMalloc) : bytes_(bytes), from_(from) {
    const std::size_t n = bytes == 0 ? 1 : bytes;
    if (from == Allocator::kPool) {
      cuda::check(cudaMallocAsync(&ptr_, n, cudaStreamPerThread), "test cudaMallocAsync");
      cuda::check(cudaStreamSynchronize(cudaStreamPerThread), "test cudaMallocAsync: synchronize");
    } else {
      cuda::check(cudaMalloc(&ptr_, n), "test cudaMalloc");
    }
  }
  ~DeviceMemory() {
    if (from_ == Allocator::kPool) {
      (void)cudaFreeAsync(ptr_, cudaStreamPerThread);
      (void)cudaStreamSynchronize(cudaStreamPerThread);
    } else {
      (void)cudaFree(ptr_);
    }
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  char* data() const { return static_cast<char*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n, std::size_t offset = 0) {
    cuda::check(cudaMemcpy(data() + offset, src, n, cudaMemcpyHostToDevice), "test upload");
    settle_legacy_stream();
  }
  std::vector<unsigned char> download(std::size_t n, std::size_t offset = 0) const {
    std::vector<unsigned char> out(n);
    cuda::check(cudaMemcpy(out.data(), data() + offset, n, cudaMemcpyDeviceToHost), "test download");
    return out;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
  Allocator from_;
};

}  // namespace dcomm::test
