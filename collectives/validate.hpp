#pragma once
// Finding caller mistakes before any I/O: everything a rank can check about its own call. The engine does not
// throw them alone: they travel with the call check so every rank fails the call (call_check.hpp).

#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/engine.hpp"

namespace dcomm::coll {

/// Why this rank's call cannot run, as "send is null but its count is 5" (the argument and the problem), or
/// empty when it can. Covers null buffers, bad roots, ops that do not fit the dtype, counts that disagree with the
/// group size, and sizes whose bytes overflow. Does no I/O.
std::string call_problem(const Args& args, const GroupView& view);

/// The most bytes one buffer of a call (or the P blocks a gather assembles) may span: byte offsets must fit a
/// ptrdiff_t, so a count whose byte size overflows is refused instead of wrapping to a small size.
inline constexpr std::size_t kMaxCallBytes = static_cast<std::size_t>(PTRDIFF_MAX);
/// Whether `count` elements of `esize` bytes, `times` over, stay within kMaxCallBytes (no overflow on the way).
/// Inline, like the two below: every call takes them, several times.
inline bool bytes_fit(std::size_t count, std::size_t esize, std::size_t times = 1) {
  std::size_t bytes = 0;
  return !__builtin_mul_overflow(count, esize, &bytes) && !__builtin_mul_overflow(bytes, times, &bytes) &&
         bytes <= kMaxCallBytes;
}

/// Whether the collective combines values (all_reduce, reduce, reduce_scatter).
inline bool is_reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}
/// Whether the call moves no data on any rank (count 0 in a regular collective other than barrier); every
/// rank agrees once the call check has passed.
inline bool moves_nothing(const Args& a) {
  if (a.vector_variant || a.coll == Collective::kBarrier) return false;
  return (a.coll == Collective::kScatter || a.coll == Collective::kReduceScatter ? a.recv.count : a.send.count) == 0;
}

}  // namespace dcomm::coll
