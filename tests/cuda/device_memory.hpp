#pragma once
// Test helpers: owned device allocations and copies, failing the test loudly on any CUDA error.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::test {

class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    cuda::check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "test cudaMalloc");
  }
  ~DeviceMemory() { (void)cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  char* data() const { return static_cast<char*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* src, std::size_t n, std::size_t offset = 0) {
    cuda::check(cudaMemcpy(data() + offset, src, n, cudaMemcpyHostToDevice), "test upload");
  }
  std::vector<unsigned char> download(std::size_t n, std::size_t offset = 0) const {
    std::vector<unsigned char> out(n);
    cuda::check(cudaMemcpy(out.data(), data() + offset, n, cudaMemcpyDeviceToHost), "test download");
    return out;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

}  // namespace dcomm::test
