#pragma once
// A host copy whose destination bypasses the cache (non-temporal stores), for outputs too large to be read again
// from cache: a plain store first reads the line it writes (read-for-ownership), so streaming a large output saves
// one pass over memory per byte written. Other processes that read the destination must be told after
// stream_copy_fence() (the stores are weakly ordered): the algorithms' barriers come after it.

#include <cstddef>

namespace dcomm::coll {

/// Outputs from this size are written with non-temporal stores (a quarter of the last-level cache measured: larger
/// outputs would not be read back from it anyway).
inline constexpr std::size_t kStreamFromBytes = std::size_t{8} << 20;

/// Copies `bytes` from `src` to `dst` (host memory, not overlapping) with non-temporal stores where the CPU has them.
void stream_copy(void* dst, const void* src, std::size_t bytes);
/// Orders the non-temporal stores before any later store (a barrier's message).
void stream_copy_fence();

}  // namespace dcomm::coll
