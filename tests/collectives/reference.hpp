#pragma once
// Inputs that differ on every (rank, index) and the serial reference the results are checked against.

#include <cstdint>
#include <dcomm/types.hpp>
#include <string>
#include <vector>

namespace dcomm::test {

using Bytes = std::vector<uint8_t>;

/// `count` elements of `t` for `rank`; values suit `op` (near 1 for prod, so products neither overflow nor
/// vanish) and `salt` varies them between calls.
Bytes make_input(DType t, ReduceOp op, int rank, std::size_t count, uint64_t salt);

/// Element i of `data` as a double (integers exactly up to 2^53).
double element(const void* data, std::size_t i, DType t);

/// Checks got[0..count) against the serial reduction, in rank order, of inputs[q][offset + i] over every rank
/// q. Integers must match exactly (wrapping like the runtime); floats within a bound derived from the dtype's
/// epsilon and the number of ranks. Returns "" or the first mismatch.
std::string check_reduction(const void* got, std::size_t count, DType t, const Reduction& red,
                            const std::vector<Bytes>& inputs, std::size_t offset);

/// Checks got[0..count) equals src[offset..offset + count) byte for byte.
std::string check_copy(const void* got, const Bytes& src, std::size_t offset, std::size_t count, DType t,
                       const std::string& what);

}  // namespace dcomm::test
