#pragma once
// Kernels the stream-ordering tests queue on a caller's stream (plain C++ header; streams as void*).

#include <cstddef>
#include <cstdint>

namespace dcomm::test {

/// Waits `delay_ns` of device time, then sets p[0..n) to `value`: work that is visibly unfinished for a while.
void queue_delayed_fill(void* stream, int32_t* p, std::size_t n, int32_t value, uint64_t delay_ns);

}  // namespace dcomm::test
