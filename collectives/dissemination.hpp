#pragma once
// A small all-to-all agreement: ⌈log₂P⌉ dissemination rounds in which every rank sends its state to r + 2^k,
// receives the state of r - 2^k and merges it in. With an idempotent, commutative merge (max, min, "lowest rank
// seen") every rank ends with the merge over all ranks. The engine agrees on its cost model and checks calls
// with it.

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

using MergeFn = std::function<void(std::vector<uint8_t>& mine, const std::vector<uint8_t>& theirs)>;

/// Uses steps [step_base, step_base + ⌈log₂P⌉). Every rank's state has the same size.
void dissemination_merge(const Context& c, uint32_t step_base, std::vector<uint8_t>& state, const MergeFn& merge);

/// dissemination_merge over a trivially copyable value: returns the merge of every rank's `mine`.
template <typename T, typename Merge>
T agree(const Context& c, uint32_t step_base, const T& mine, Merge merge) {
  static_assert(std::is_trivially_copyable_v<T>, "agree() sends the value's bytes");
  std::vector<uint8_t> state(sizeof(T));
  std::memcpy(state.data(), &mine, sizeof(T));
  dissemination_merge(c, step_base, state, [&](std::vector<uint8_t>& m, const std::vector<uint8_t>& t) {
    T a, b;
    std::memcpy(&a, m.data(), sizeof(T));
    std::memcpy(&b, t.data(), sizeof(T));
    merge(a, b);
    std::memcpy(m.data(), &a, sizeof(T));
  });
  T out;
  std::memcpy(&out, state.data(), sizeof(T));
  return out;
}

}  // namespace dcomm::coll
