#pragma once
// How the element-wise kernel splits [0, count) between 16-byte packs and single elements. Plain C++ usable from
// both the kernel and host tests, so the coverage of every element exactly once can be checked without a GPU.
//
//   [0, head)                       singles: until dst reaches a 16-byte boundary
//   [head, head + packs * lanes)    packs of `lanes` = 16 / elem elements, dst and src both 16-byte aligned
//   [head + packs * lanes, count)   singles: the tail
// When dst and src are misaligned differently no pack can serve both: head = count and packs = 0.

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DCOMM_HOST_DEVICE __host__ __device__
#else
#define DCOMM_HOST_DEVICE
#endif

namespace dcomm::coll::kernels {

struct PackSplit {
  std::size_t head = 0;   ///< leading singles
  std::size_t packs = 0;  ///< 16-byte packs after them
};

/// `dst` and `src` are addresses aligned to `elem` bytes (1, 2, 4 or 8).
DCOMM_HOST_DEVICE constexpr PackSplit split_for_packs(std::uintptr_t dst, std::uintptr_t src, std::size_t count,
                                                      std::size_t elem) {
  PackSplit s{count, 0};
  if (dst % 16 != src % 16) return s;
  s.head = ((16 - dst % 16) % 16) / elem;
  if (s.head > count) s.head = count;
  s.packs = (count - s.head) / (16 / elem);
  return s;
}

/// How many elements the singles cover (head and tail together).
DCOMM_HOST_DEVICE constexpr std::size_t single_count(const PackSplit& s, std::size_t count, std::size_t lanes) {
  return count - s.packs * lanes;
}

/// The element index of single number `j` (< single_count): the head first, then the tail.
DCOMM_HOST_DEVICE constexpr std::size_t single_index(const PackSplit& s, std::size_t lanes, std::size_t j) {
  return j < s.head ? j : s.head + s.packs * lanes + (j - s.head);
}

}  // namespace dcomm::coll::kernels
