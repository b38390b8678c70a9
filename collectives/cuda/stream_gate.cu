// The counter-wait kernel behind stream_gate.hpp.

#include <cuda_runtime_api.h>

#include "collectives/cuda/launch.hpp"

namespace dcomm::coll::kernels {
namespace {

// A system-scope acquire load: sees the host's release store to mapped memory, never a cached copy.
__device__ __forceinline__ uint64_t load_acquire_system(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void counter_wait_kernel(const uint64_t* counter, uint64_t target, uint64_t timeout_ns,
                                    uint32_t* timed_out) {
  const uint64_t start = global_timer_ns();
  while (load_acquire_system(counter) < target) {
    if (global_timer_ns() - start > timeout_ns) {
      *reinterpret_cast<volatile uint32_t*>(timed_out) = 1;
      __threadfence_system();
      return;
    }
    __nanosleep(2000);  // microseconds between reads keep the PCIe traffic negligible
  }
}

}  // namespace

void launch_counter_wait(void* stream, const uint64_t* counter, uint64_t target, uint64_t timeout_ns,
                         uint32_t* timed_out) {
  counter_wait_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(counter, target, timeout_ns, timed_out);
}

}  // namespace dcomm::coll::kernels
