// The entry points of reduce_cuda.hpp and stream_gate.hpp: argument checks and errors here, the kernels in the
// .cu files behind launch.hpp.

#include "collectives/cuda/reduce_cuda.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include <cstdint>

#include "collectives/cuda/launch.hpp"
#include "collectives/cuda/stream_gate.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::coll {
namespace {

thread_local void* t_stream = nullptr;

void* resolve(void* stream) { return stream ? stream : current_stream(); }

void check_aligned(const char* what, const char* name, const void* p, DType dtype) {
  if (reinterpret_cast<std::uintptr_t>(p) % dtype_size(dtype) != 0) {
    throw InvalidUsageError(fmt::format("{}: {} pointer {} is not aligned to its {}-byte {} elements; device loads "
                                        "need natural alignment - offset the buffer by whole elements",
                                        what, name, p, dtype_size(dtype), to_string(dtype)));
  }
}

void check_launched(const char* what, DType dtype, std::size_t count) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    cuda::throw_error(err, fmt::format("{} of {} {} elements: kernel launch", what, count, to_string(dtype)));
  }
}

}  // namespace

void* current_stream() noexcept { return t_stream ? t_stream : static_cast<void*>(cudaStreamPerThread); }

StreamScope::StreamScope(void* stream) noexcept : previous_(t_stream) { t_stream = stream; }
StreamScope::~StreamScope() { t_stream = previous_; }

void reduce_cuda(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, void* stream) {
  constexpr const char* kWhat = "reduce_cuda";
  if (!op_fits_dtype(op, dtype)) {
    throw InvalidUsageError(fmt::format("{}: {} does not apply to {} (bitwise ops need an integer dtype)", kWhat,
                                        to_string(op), to_string(dtype)));
  }
  if (count == 0) return;
  check_aligned(kWhat, "dst", dst, dtype);
  check_aligned(kWhat, "src", src, dtype);
  kernels::launch_reduce(dst, src, count, dtype, op, resolve(stream));
  check_launched(kWhat, dtype, count);
}

void scale_cuda(void* dst, const void* src, std::size_t count, DType dtype, double scale, void* stream) {
  constexpr const char* kWhat = "scale_cuda";
  if (count == 0) return;
  check_aligned(kWhat, "dst", dst, dtype);
  check_aligned(kWhat, "src", src, dtype);
  kernels::launch_scale(dst, src, count, dtype, scale, resolve(stream));
  check_launched(kWhat, dtype, count);
}

void divide_cuda(void* dst, std::size_t count, DType dtype, int divisor, void* stream) {
  constexpr const char* kWhat = "divide_cuda";
  if (divisor < 1) {
    throw InvalidUsageError(fmt::format("{}: divisor {} must be at least 1 (avg divides by the group size)", kWhat,
                                        divisor));
  }
  if (count == 0) return;
  check_aligned(kWhat, "dst", dst, dtype);
  kernels::launch_divide(dst, count, dtype, divisor, resolve(stream));
  check_launched(kWhat, dtype, count);
}

void copy_cuda(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  const auto s = static_cast<cudaStream_t>(resolve(stream));
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto from = reinterpret_cast<std::uintptr_t>(src);
  if (d < from + bytes && from < d + bytes) {
    // cudaMemcpy is undefined on overlapping ranges, but callers may move a block within one buffer (memmove's
    // contract, which the host version keeps): bounce through stream-ordered scratch memory.
    void* scratch = nullptr;
    cuda::check(cudaMallocAsync(&scratch, bytes, s), fmt::format("copy_cuda: scratch of {}", format_bytes(bytes)));
    cudaError_t err = cudaMemcpyAsync(scratch, src, bytes, cudaMemcpyDefault, s);
    if (err == cudaSuccess) err = cudaMemcpyAsync(dst, scratch, bytes, cudaMemcpyDefault, s);
    (void)cudaFreeAsync(scratch, s);
    cuda::check(err, fmt::format("copy_cuda: overlapping cudaMemcpyAsync of {}", format_bytes(bytes)));
    return;
  }
  cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s),
              fmt::format("copy_cuda: cudaMemcpyAsync of {}", format_bytes(bytes)));
}

void* alloc_cuda(std::size_t bytes, void* stream) {
  void* p = nullptr;
  cuda::check(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, static_cast<cudaStream_t>(resolve(stream))),
              fmt::format("alloc_cuda: cudaMallocAsync of {} of scratch", format_bytes(bytes)));
  return p;
}

void free_cuda(void* p, void* stream) noexcept {
  if (p != nullptr) (void)cudaFreeAsync(p, static_cast<cudaStream_t>(resolve(stream)));
  (void)cudaGetLastError();
}

void synchronize_cuda(void* stream, const Deadline& deadline, const char* what) {
  cuda::wait_stream(static_cast<cudaStream_t>(resolve(stream)), deadline, what);
}

void queue_counter_wait(void* stream, const uint64_t* counter, uint64_t target, uint64_t timeout_ns,
                        uint32_t* timed_out) {
  kernels::launch_counter_wait(stream, counter, target, timeout_ns, timed_out);
  cuda::check(cudaGetLastError(), fmt::format("queue_counter_wait: launch of the wait for count {}", target));
}

}  // namespace dcomm::coll
