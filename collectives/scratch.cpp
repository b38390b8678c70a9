// Scratch memory on the call's device: malloc for host buffers, stream-ordered CUDA memory for device buffers
// (with the CUDA reductions built in). Stream-ordered, because a plain cudaFree would wait for every stream of the
// device, including a caller's stream parked behind a wait_stream() gate on this very collective.

#include <fmt/format.h>

#include <cstdlib>
#include <dcomm/error.hpp>
#include <new>
#include <utility>

#include "collectives/context.hpp"
#include "collectives/device_support.hpp"

#if DCOMM_CUDA_REDUCE
#include "collectives/cuda/reduce_cuda.hpp"
#endif

namespace dcomm::coll {

namespace {

void release(char* data, const Device& device) noexcept {
  if (data == nullptr) return;
#if DCOMM_CUDA_REDUCE
  if (!device.is_host()) {
    free_cuda(data, nullptr);
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
    data_ = static_cast<char*>(alloc_cuda(bytes, nullptr));  // throws a CudaError naming the size
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
