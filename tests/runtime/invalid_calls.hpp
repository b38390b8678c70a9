#pragma once
// Calls that are invalid on one rank only (a null buffer there, a root's buffer too small, a count whose bytes
// overflow), tried at every position of the bad rank (first, middle, last; root and not). Every rank must fail
// the same call with an InvalidUsageError naming the bad rank and the reason; no rank may return success (and a
// success whose data differs from the serial reference is a silent wrong answer); the group's next call must give
// the right answer. Public API only, so the same code runs as threads (unit) and as processes (mp, dcomm-run).

#include <string>
#include <vector>

#include <dcomm/dcomm.hpp>

namespace dcomm::test {

struct InvalidCallOptions {
  bool async_op = false;  ///< issue the bad call and the next one as async_op and wait for both
  std::string only;       ///< run only the bad calls whose name contains this (empty: all)
  std::string algorithm;  ///< force this algorithm for the bad calls (empty: the cost model's)
};

/// Runs every bad call at every bad-rank position on `pg`; appends one line per problem to `failures`. Returns
/// the number of bad calls tried.
int check_invalid_calls(ProcessGroup& pg, std::vector<std::string>& failures, const InvalidCallOptions& opts = {});

/// Every rank passes a count whose byte size overflows (2^62 + 2 float32) to all_reduce, and an all_gather whose
/// P blocks overflow: each must raise InvalidUsageError on every rank (not a crash, not std::bad_alloc), and the
/// group must stay usable.
void check_overflowing_counts(ProcessGroup& pg, std::vector<std::string>& failures);

}  // namespace dcomm::test
