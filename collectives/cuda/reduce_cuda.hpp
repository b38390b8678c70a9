#pragma once
// Device versions of collectives/reduce.hpp, for buffers in CUDA device memory (built with DCOMM_HAVE_CUDA).
// A plain C++ header: streams travel as void* (a cudaStream_t), so host code can dispatch here by Device without
// seeing CUDA types.
//
// Every function only queues work on the stream and returns; synchronize_cuda() waits for it. A null stream means
// this thread's dcomm stream: the one a StreamScope set, else CUDA's per-thread default stream. The legacy default
// stream is never used by default, because it would serialise dcomm's kernels behind the caller's other streams.
// Work runs on the current device; the caller makes the buffers' device current.
//
// Pointers must be aligned to their element size (cudaMalloc and slices of it are); dst and src need not share an
// alignment. 16-byte vector loads are used where dst and src are equally misaligned; the rest is done element-wise.

#include <cstddef>

#include <dcomm/types.hpp>

#include "common/deadline.hpp"

namespace dcomm::coll {

/// dst[i] = dst[i] (op) src[i]. op is sum, prod, min, max, or band/bor/bxor on integers; avg and premul_sum reduce
/// as sum (their scaling is separate). 16-bit floats combine in float32 and round back once. Integer sum and prod
/// wrap modulo 2^bits. Throws InvalidUsageError for a bitwise op on floats or a misaligned pointer.
void reduce_cuda(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, void* stream);
/// dst[i] = src[i] * scale (premul_sum). dst may equal src. Floats multiply in their accumulation type (float32 for
/// 16-bit floats and float32, float64 for float64); integers in float64, truncated toward zero.
void scale_cuda(void* dst, const void* src, std::size_t count, DType dtype, double scale, void* stream);
/// dst[i] = dst[i] / divisor (avg). Integers truncate toward zero; floats divide in their accumulation type.
void divide_cuda(void* dst, std::size_t count, DType dtype, int divisor, void* stream);
/// Copies `bytes` between any two CUDA-visible buffers (device, or pinned/registered host memory). Overlapping
/// ranges are copied as memmove would (through scratch memory).
void copy_cuda(void* dst, const void* src, std::size_t bytes, void* stream);
/// Scratch device memory from the stream-ordered allocator (cudaMallocAsync) on `stream` (null: as above), usable
/// by work queued on that stream after this call. Only for memory that never leaves this process: cuda_ipc cannot
/// export pool memory, so scratch that algorithms may send comes from device_blocks.hpp (cudaMalloc, cached).
void* alloc_cuda(std::size_t bytes, void* stream);
/// Returns alloc_cuda memory once the work queued on `stream` so far is done with it. Never throws.
void free_cuda(void* p, void* stream) noexcept;
/// Waits, bounded by `deadline`, for everything queued on `stream` (null: as above). `what` starts any error.
void synchronize_cuda(void* stream, const Deadline& deadline, const char* what);

/// The stream the functions above use when given null.
void* current_stream() noexcept;

/// Sets this thread's dcomm stream (a cudaStream_t) until the scope ends; scopes nest.
class StreamScope {
 public:
  explicit StreamScope(void* stream) noexcept;
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  void* previous_;
};

}  // namespace dcomm::coll
