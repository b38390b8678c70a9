#pragma once
// Threads as ranks through the public API: each thread calls dcomm::init() with its rank, a shared memory store
// and the loopback transport. Rank threads record failures as text; only the main thread asserts.

#include <functional>
#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace dcomm::test {

using RankBody = std::function<void(ProcessGroup& pg, std::vector<std::string>& failures)>;

/// Runs `body` on `size` rank threads; returns every failure as "rank r: ...". An exception escaping the body is
/// a failure too.
std::vector<std::string> run_ranks(int size, const RankBody& body, Duration timeout = std::chrono::seconds(60));

/// A value that differs on every (rank, index), never zero.
inline double value_of(int rank, std::size_t i) { return 1.0 + rank * 1000.0 + static_cast<double>(i % 997) * 0.25; }

/// A value that differs on every (rank, index) and call (`salt`), never zero, exact in double sums.
inline double salted_value(int rank, std::size_t i, int salt) {
  return 1.0 + rank * 1000.0 + static_cast<double>(i) * 0.25 + salt * 0.0625;
}

/// salted_value() of elements 0..n-1.
inline std::vector<double> salted_values(int rank, std::size_t n, int salt) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = salted_value(rank, i, salt);
  return v;
}

}  // namespace dcomm::test

/// Records a failure (from a rank thread) when `cond` is false.
#define RANK_EXPECT(failures, cond, msg)                              \
  do {                                                                \
    if (!(cond)) (failures).push_back(std::string(msg) + " [" #cond "]"); \
  } while (0)
