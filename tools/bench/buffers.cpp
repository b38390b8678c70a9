#include "tools/bench/buffers.hpp"

#include <dcomm/error.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

#include "dcomm_config.h"
#if DCOMM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace dcomm::bench {
namespace {

#if DCOMM_HAVE_CUDA
void cuda_check(cudaError_t rc, const char* what, std::size_t bytes) {
  if (rc != cudaSuccess) {
    throw Error(ErrorCode::kCudaError, std::string(what) + " (" + std::to_string(bytes) +
                                           " B) failed: " + cudaGetErrorName(rc) + " - is a GPU visible?");
  }
}
#else
[[noreturn]] void no_cuda() { throw InvalidUsageError("CUDA memory requested but this build has no CUDA"); }
#endif

}  // namespace

DeviceMemory::DeviceMemory(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  const std::size_t n = bytes == 0 ? 1 : bytes;  // a real pointer even for empty sizes
  if (device.is_host()) {
    // Page alignment as a pinned or registered buffer would have; keeps copies comparable across sizes.
    data_ = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (data_ == nullptr) throw SystemError("allocating " + std::to_string(bytes) + " B", ENOMEM);
    return;
  }
#if DCOMM_HAVE_CUDA
  cuda_check(cudaSetDevice(device.index), "cudaSetDevice", bytes);
  cuda_check(cudaMalloc(&data_, n), "cudaMalloc", bytes);
#else
  no_cuda();
#endif
}

Device local_cuda_device(int local_rank) {
#if DCOMM_HAVE_CUDA
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count <= 0) {
    throw Error(ErrorCode::kCudaError, std::string("--device cuda: no CUDA device is visible to local rank ") +
                                           std::to_string(local_rank) + " (cudaGetDeviceCount: " +
                                           (rc == cudaSuccess ? "0 devices" : cudaGetErrorName(rc)) +
                                           "); check CUDA_VISIBLE_DEVICES and the driver");
  }
  return Device::cuda(local_rank % count);
#else
  (void)local_rank;
  no_cuda();
#endif
}

DeviceMemory::~DeviceMemory() {
  if (device_.is_host()) {
    std::free(data_);
    return;
  }
#if DCOMM_HAVE_CUDA
  cudaFree(data_);
#endif
}

void DeviceMemory::upload(const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  if (device_.is_host()) {
    std::memcpy(data_, host, bytes);
    return;
  }
#if DCOMM_HAVE_CUDA
  cuda_check(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device", bytes);
#endif
}

void DeviceMemory::download(void* host, std::size_t bytes) const {
  if (bytes == 0) return;
  if (device_.is_host()) {
    std::memcpy(host, data_, bytes);
    return;
  }
#if DCOMM_HAVE_CUDA
  cuda_check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host", bytes);
#endif
}

void device_sync(const Device& device) {
  if (device.is_host()) return;
#if DCOMM_HAVE_CUDA
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", 0);
#else
  no_cuda();
#endif
}

}  // namespace dcomm::bench
