#pragma once
// A small all-to-all agreement: ⌈log₂P⌉ dissemination rounds in which every rank sends its state to r + 2^k,
// receives the state of r - 2^k and merges it in. With an idempotent, commutative merge (max, min, "lowest rank
// seen") every rank ends with the merge over all ranks. The engine agrees on its cost model and checks calls
// with it.

#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/context.hpp"

namespace dcomm::coll {

using MergeFn = std::function<void(std::vector<uint8_t>& mine, const std::vector<uint8_t>& theirs)>;

/// Uses steps [step_base, step_base + ⌈log₂P⌉). Every rank's state has the same size.
void dissemination_merge(const Context& c, uint32_t step_base, std::vector<uint8_t>& state, const MergeFn& merge);

}  // namespace dcomm::coll
