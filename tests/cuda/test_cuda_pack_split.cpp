// The kernel's split of [0, count) into single elements and 16-byte packs, checked on the host (it is the same
// code the kernel runs): every element is covered exactly once, and every pack starts 16-byte aligned in both dst
// and src, for every element size, count 0..70 and every pair of element-aligned misalignments.

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "collectives/cuda/pack_split.hpp"

using namespace dcomm::coll::kernels;

namespace {

std::string check_split(std::uintptr_t dst, std::uintptr_t src, std::size_t count, std::size_t elem) {
  const std::size_t lanes = 16 / elem;
  const PackSplit s = split_for_packs(dst, src, count, elem);
  std::vector<int> seen(count, 0);
  for (std::size_t p = 0; p < s.packs; ++p) {
    const std::size_t first = s.head + p * lanes;
    if ((dst + first * elem) % 16 != 0 || (src + first * elem) % 16 != 0) return fmt::format("pack {} misaligned", p);
    for (std::size_t k = 0; k < lanes; ++k) {
      if (first + k >= count) return fmt::format("pack {} runs past the end", p);
      ++seen[first + k];
    }
  }
  for (std::size_t j = 0; j < single_count(s, count, lanes); ++j) {
    const std::size_t i = single_index(s, lanes, j);
    if (i >= count) return fmt::format("single {} -> element {} past the end", j, i);
    ++seen[i];
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (seen[i] != 1) return fmt::format("element {} covered {} times", i, seen[i]);
  }
  // Equal misalignment with room for a pack must use one: otherwise the fast path silently never runs.
  if (dst % 16 == src % 16 && count * elem >= 32 && s.packs == 0) return "no packs despite a shared alignment";
  return {};
}

}  // namespace

TEST_CASE("the element-wise split covers every element once and aligns every pack", "[cuda][split]") {
  std::vector<std::string> failures;
  for (std::size_t elem : {1, 2, 4, 8}) {
    for (std::uintptr_t d = 0; d < 16; d += elem) {
      for (std::uintptr_t s = 0; s < 16; s += elem) {
        for (std::size_t count = 0; count <= 70; ++count) {
          std::string f = check_split(0x10000 + d, 0x20000 + s, count, elem);
          if (!f.empty()) {
            failures.push_back(fmt::format("elem {} dst%16 {} src%16 {} count {}: {}", elem, d, s, count, f));
          }
        }
      }
    }
  }
  INFO(fmt::format("{} failures, first: {}", failures.size(), failures.empty() ? "" : failures.front()));
  CHECK(failures.empty());
}
