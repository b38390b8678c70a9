#pragma once
// A communication library the bench measures: dcomm itself, and (with --vs mpi) OpenMPI on the same ranks.
// Both run the same Case on the same Workspace through measure(), so their numbers differ only by the library.

#include <cstddef>
#include <string>
#include <vector>

#include "tools/bench/case.hpp"

namespace dcomm::bench {

class Library {
 public:
  virtual ~Library() = default;
  virtual std::string name() const = 0;  ///< "dcomm", "mpi"
  /// Empty when the library can run the case; otherwise why not (e.g. MPI has no bfloat16 sum).
  virtual std::string unsupported(const Case& c) const = 0;
  /// Synchronizes the ranks before a case's iterations.
  virtual void barrier(const Case& c) = 0;
  /// One call of the case's collective, complete on return; throws on failure or timeout.
  virtual void run_once(const Case& c, const Workspace& ws) = 0;
  /// The algorithm the library picks for a case that names none ("" when it cannot say).
  virtual std::string chosen(const Case& c) const {
    (void)c;
    return "";
  }
};

/// What one rank measured for one case.
struct LocalResult {
  std::vector<double> times_us;  ///< one per timed iteration
  std::size_t wrong = 0;         ///< elements that failed --check, over every iteration
  /// The timed loop's wall time over its iterations, from the first timed call's start to the last's end: the
  /// period of a back-to-back loop, counting what a library does between calls (outside each call's timer) as well
  /// as the bench's own work there (a clock read and the watchdog's; with --check the fill and check too).
  double loop_us = 0;
};

class Watchdog;
/// Warmup, then timed iterations, filling and checking around each (untimed) when c.check.
LocalResult measure(Library& lib, const Case& c, Workspace& ws, Watchdog* watchdog);

}  // namespace dcomm::bench
