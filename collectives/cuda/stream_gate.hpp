#pragma once
// A device-side wait on a counter the host advances: how a caller's CUDA stream is made to wait for a collective
// that finishes on the host, without blocking the host (see runtime/cuda/stream_order.hpp). Plain C++ header.

#include <cstdint>

namespace dcomm::coll {

/// Queues on `stream` (a cudaStream_t) one single-thread kernel that returns once `*counter >= target`.
/// `counter` and `timed_out` are host-mapped pinned memory (cudaHostAlloc with cudaHostAllocMapped) the host
/// writes with release stores. GPU spin loops stay bounded: after `timeout_ns` of device time the kernel gives up,
/// sets `*timed_out` to 1 and returns, releasing the stream.
void queue_counter_wait(void* stream, const uint64_t* counter, uint64_t target, uint64_t timeout_ns,
                        uint32_t* timed_out);

}  // namespace dcomm::coll
