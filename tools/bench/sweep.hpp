#pragma once
// Runs a plan: every group, size and algorithm through dcomm (and MPI beside it), every rank's timings
// gathered to rank 0, which prints each size's lines as they complete.

#include <dcomm/process_group.hpp>

#include <iosfwd>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/args.hpp"
#include "tools/bench/exchange.hpp"
#include "tools/bench/library.hpp"
#include "tools/bench/plan.hpp"
#include "tools/bench/row.hpp"

namespace dcomm::bench {

/// A run that could not finish: a stuck or failed case (exit 1) or a usage mistake found by the library
/// (exit 2). The message is one line, already naming the case, the rank and what to check.
struct BenchFailure : std::runtime_error {
  BenchFailure(const std::string& message, int code) : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

class Sweep {
 public:
  /// libs[0] is dcomm; libs[1], if present, the peer library (MPI).
  Sweep(const Options& opts, ProcessGroupPtr pg, std::vector<std::unique_ptr<Library>> libs);
  /// Runs the plan; on rank 0 returns every row (other ranks return an empty list). Throws BenchFailure.
  std::vector<Row> run(const std::vector<Group>& plan, std::ostream& out);

 private:
  Case make_case(const Group& g, const Layout& l, const std::string& algo) const;
  Row run_case(Library& lib, const Case& c);
  [[noreturn]] void fail(const Library& lib, const Case& c, uint64_t seq, const std::exception& e);
  /// Called by the watchdog when a call outlives its timeout: prints the report; the watchdog then exits.
  void report_stuck();
  std::string describe(const Library& lib, const Case& c) const;
  std::string arrival_report(uint64_t seq);

  const Options& opts_;
  ProcessGroupPtr pg_;
  std::vector<std::unique_ptr<Library>> libs_;
  Exchange exchange_;
  uint64_t seq_ = 0;
  std::mutex current_mu_;  // the case in flight, for the watchdog's report
  std::string current_;
  uint64_t current_seq_ = 0;
};

}  // namespace dcomm::bench
