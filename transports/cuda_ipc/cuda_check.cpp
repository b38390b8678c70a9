#include "transports/cuda_ipc/cuda_check.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

namespace dcomm::cuda {

void throw_error(cudaError_t err, std::string_view what) {
  // Clear the sticky "last error" so a later, unrelated check does not report this failure again.
  (void)cudaGetLastError();
  throw Error(ErrorCode::kCudaError,
              fmt::format("{}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err)));
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

// cudaEventQuery and cudaStreamQuery answer cudaErrorNotReady while work is queued; poll them under a deadline.
template <typename Query>
void poll_until_ready(Query query, const Deadline& deadline, std::string_view what) {
  Backoff backoff(std::chrono::microseconds(200));
  for (;;) {
    cudaError_t err = query();
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) throw_error(err, what);
    if (deadline.expired()) {
      throw TimeoutError(fmt::format("{}: device work not done after {} (timeout {}); a kernel may be waiting on "
                                     "work that never came - check the other ranks and the stream's earlier work",
                                     what, format_duration(deadline.elapsed()), format_duration(deadline.timeout())));
    }
    backoff.pause();
  }
}

}  // namespace

void wait_event(cudaEvent_t event, const Deadline& deadline, std::string_view what) {
  poll_until_ready([event] { return cudaEventQuery(event); }, deadline, what);
}

void wait_stream(cudaStream_t stream, const Deadline& deadline, std::string_view what) {
  poll_until_ready([stream] { return cudaStreamQuery(stream); }, deadline, what);
}

DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  // Always set, even when it is already the current device: cudaSetDevice also makes the device's primary context
  // current on this thread, which driver calls (cuMemGetAddressRange) need on a thread that never used CUDA before.
  check(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  (void)cudaGetLastError();
}

}  // namespace dcomm::cuda
