#pragma once
// Memory the benchmark's collectives run on: host memory, or CUDA device memory when built with CUDA.
// The bench stages through host images to fill and check, outside the timed region.

#include <dcomm/types.hpp>

#include <cstddef>

namespace dcomm::bench {

class DeviceMemory {
 public:
  DeviceMemory(std::size_t bytes, Device device);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  /// Copies the first `bytes` of `host` in / out.
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
  Device device_;
};

/// The CUDA device a rank with this local rank runs on: local_rank modulo the devices it sees (ranks share a GPU
/// when a node has fewer GPUs than ranks, as torchrun and NCCL's tests allow). Throws where none is visible.
Device local_cuda_device(int local_rank);

/// Waits for the device's queued work (a no-op for host memory), so that a timed call includes it.
void device_sync(const Device& device);

}  // namespace dcomm::bench
