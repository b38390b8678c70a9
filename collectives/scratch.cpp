// Scratch memory on the call's device: malloc for host buffers, cudaMalloc for device buffers (with the CUDA
// reductions built in).

#include <fmt/format.h>

#include <cstdlib>
#include <dcomm/error.hpp>
#include <new>
#include <utility>

#include "collectives/context.hpp"
#include "collectives/device_support.hpp"

#if DCOMM_CUDA_REDUCE
#include <cuda_runtime_api.h>
#endif

namespace dcomm::coll {

namespace {

void release(char* data, const Device& device) noexcept {
  if (data == nullptr) return;
#if DCOMM_CUDA_REDUCE
  if (!device.is_host()) {
    cudaFree(data);
    return;
  }
#endif
  (void)device;
  std::free(data);
}

}  // namespace

Scratch::Scratch(std::size_t bytes, const Device& device) : device_(device) {
  if (bytes == 0) return;
  if (!device.is_host()) {
#if DCOMM_CUDA_REDUCE
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      throw Error(ErrorCode::kCudaError, fmt::format("collectives: cudaMalloc of {} of scratch on {} failed: {}",
                                                     format_bytes(bytes), to_string(device), cudaGetErrorName(err)));
    }
    data_ = static_cast<char*>(p);
    return;
#else
    throw InvalidUsageError(fmt::format(
        "collectives: scratch memory on {} needs the CUDA reductions, which this build lacks; pass host buffers",
        to_string(device)));
#endif
  }
  data_ = static_cast<char*>(std::malloc(bytes));
  if (data_ == nullptr) throw std::bad_alloc();
}

Scratch::Scratch(Scratch&& other) noexcept : data_(std::exchange(other.data_, nullptr)), device_(other.device_) {}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    release(data_, device_);
    data_ = std::exchange(other.data_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

Scratch::~Scratch() { release(data_, device_); }

}  // namespace dcomm::coll
