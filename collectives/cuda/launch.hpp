#pragma once
// The kernel launchers compiled by nvcc, as plain C++ (streams as void*). They only queue work: the callers in
// reduce_cuda.cpp and stream_gate.cpp check arguments before and the launch status after. Kept apart from the
// checking code because nvcc's front end cannot compile fmt, which every error message here uses.

#include <cstddef>
#include <cstdint>

#include <dcomm/types.hpp>

namespace dcomm::coll::kernels {

/// dst[i] = dst[i] (op) src[i]; `op` fits `dtype` (checked by the caller); avg and premul_sum reduce as sum.
void launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, void* stream);
/// dst[i] = src[i] * scale.
void launch_scale(void* dst, const void* src, std::size_t count, DType dtype, double scale, void* stream);
/// dst[i] = dst[i] / divisor, divisor >= 1.
void launch_divide(void* dst, std::size_t count, DType dtype, int divisor, void* stream);
/// One thread that returns once *counter >= target, or sets *timed_out after timeout_ns.
void launch_counter_wait(void* stream, const uint64_t* counter, uint64_t target, uint64_t timeout_ns,
                         uint32_t* timed_out);

}  // namespace dcomm::coll::kernels
