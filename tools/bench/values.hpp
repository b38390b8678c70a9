#pragma once
// The data --check runs with, and its closed-form expected results. Every (rank, index, iteration) gets its own
// value, so a block from the wrong rank, a stale iteration or a shifted index all show as wrong; values stay
// small integers so every dtype (even int8 and bfloat16) holds them and their sums exactly.

#include <dcomm/types.hpp>

#include <cstddef>

namespace dcomm::bench {

/// What a reducing collective's rank contributes at element `index`: b + rank with b = 1 + (index + iter) % 5.
double reduce_input(int rank, std::size_t index, int iter);
/// The reduction of reduce_input over ranks 0..world-1, in closed form for sum, avg, premul_sum, min and max
/// (a fold over the ranks for prod and the bitwise ops), converted as `dtype` would store it.
double reduce_expected(ReduceOp op, int world, std::size_t index, int iter, DType dtype);
/// What a data-moving collective's rank sends at element `index`: 1 + (31 rank + 7 index + 13 iter) % 101.
double move_input(int rank, std::size_t index, int iter);

/// Element i of a buffer of `dtype`, as a double; and storing a double (integers wrap as the dtype does).
double load(const void* data, DType dtype, std::size_t i);
void store(void* data, DType dtype, std::size_t i, double v);
/// Whether a result equals the expectation: exactly for integers, to the dtype's precision for floats.
bool matches(double got, double want, DType dtype);

}  // namespace dcomm::bench
