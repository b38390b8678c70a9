#pragma once
// The CUDA helpers every CUDA-aware layer shares (built only with DCOMM_HAVE_CUDA). They sit in the lowest layer
// that talks to CUDA, the cuda_ipc transport, so that collectives/cuda and runtime/cuda can use them without a
// layer ever including one above it.

#include <cuda_runtime_api.h>

#include <string_view>

#include "common/deadline.hpp"

namespace dcomm::cuda {

/// Throws dcomm::Error(kCudaError) reading "<what>: cudaErrorX (the runtime's text)".
[[noreturn]] void throw_error(cudaError_t err, std::string_view what);

/// Throws unless `err` is cudaSuccess.
inline void check(cudaError_t err, std::string_view what) {
  if (err != cudaSuccess) throw_error(err, what);
}

/// How many CUDA devices this process can use; 0 when there is no driver or no device. Never throws.
int device_count() noexcept;

/// Polls `event` (cudaEventQuery, with Backoff) until it has fired; the host is never parked inside the driver,
/// so the wait stays bounded. Throws TimeoutError naming `what` at the deadline, CudaError when the work failed.
void wait_event(cudaEvent_t event, const Deadline& deadline, std::string_view what);

/// The same for everything queued on `stream` so far.
void wait_stream(cudaStream_t stream, const Deadline& deadline, std::string_view what);

/// Makes `device` (and its primary context) current for the lifetime of the guard and restores the previous device.
/// Never throws on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace dcomm::cuda
