#pragma once
// A small all-to-all agreement: ⌈log₂P⌉ dissemination rounds in which every rank sends its state to r + 2^k,
// receives the state of r - 2^k and merges it in. With an idempotent, commutative merge (max, min, "lowest rank
// seen") every rank ends with the merge over all ranks. The engine agrees on its cost model and checks calls
// with it, so it runs on every call: the state stays on the stack, with no allocation.

#include <cstdint>
#include <type_traits>

#include "collectives/context.hpp"
#include "collectives/patterns.hpp"

namespace dcomm::coll {

/// Returns the merge of every rank's `mine`, using steps [step_base, step_base + ⌈log₂P⌉).
template <typename T, typename Merge>
T agree(const Context& c, uint32_t step_base, const T& mine, Merge merge) {
  static_assert(std::is_trivially_copyable_v<T>, "agree() sends the value's bytes");
  const int p = c.size();
  T state = mine;
  for (int k = 0; k < pattern::ceil_log2(p); ++k) {
    // Send a copy: merging into `state` must not race with the send of it.
    T out = state;
    T theirs;
    c.sendrecv(pattern::dissemination_to(c.rank(), p, k), &out, sizeof(T), pattern::dissemination_from(c.rank(), p, k),
               &theirs, sizeof(T), step_base + static_cast<uint32_t>(k));
    merge(state, theirs);
  }
  return state;
}

}  // namespace dcomm::coll
