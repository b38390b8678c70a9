#include "tests/cuda/test_kernels.hpp"

#include <cuda_runtime_api.h>

namespace dcomm::test {
namespace {

__global__ void delayed_fill_kernel(int32_t* p, std::size_t n, int32_t value, uint64_t delay_ns) {
  if (threadIdx.x == 0) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
      __nanosleep(10000);
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delay_ns);
  }
  __syncthreads();
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = value;
}

}  // namespace

void queue_delayed_fill(void* stream, int32_t* p, std::size_t n, int32_t value, uint64_t delay_ns) {
  delayed_fill_kernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(p, n, value, delay_ns);
}

}  // namespace dcomm::test
