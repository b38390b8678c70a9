#pragma once
// Memory operations the algorithms use, on host or device memory alike. Host versions live in
// collectives/reduce_host.cpp; CUDA versions in collectives/cuda/ (built with DCOMM_HAVE_CUDA) behind the same
// functions, chosen by `device`. 16-bit floats are converted to float32 to combine and rounded back once.

#include <cstddef>
#include <dcomm/types.hpp>

namespace dcomm::coll {

/// dst[i] = dst[i] (op) src[i] for i < count. op is one of sum, prod, min, max, band, bor, bxor
/// (avg and premul_sum reduce as sum; their scaling is separate).
void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, const Device& device);
/// dst[i] = src[i] * scale (premul_sum's pre-multiplication). dst may equal src.
void scale_into(void* dst, const void* src, std::size_t count, DType dtype, double scale, const Device& device);
/// dst[i] = dst[i] / divisor (avg). Integers divide with truncation toward zero.
void divide_by(void* dst, std::size_t count, DType dtype, int divisor, const Device& device);
/// memcpy for either kind of memory (both sides on `device`).
void copy_bytes(void* dst, const void* src, std::size_t bytes, const Device& device);

}  // namespace dcomm::coll
