#pragma once
// One line of the results: a case as every rank measured it, summarized the way the table, JSON and CSV show it.

#include <dcomm/store.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/library.hpp"
#include "tools/bench/stats.hpp"

namespace dcomm::bench {

struct RankStats {
  int rank = 0;
  double mean_us = 0, min_us = 0, max_us = 0;
  double loop_us = 0;  ///< LocalResult::loop_us
  std::size_t wrong = 0;
};

struct Row {
  std::string library;  ///< "dcomm" or "mpi"
  Coll coll = Coll::kAllReduce;
  DType dtype = DType::kFloat32;
  std::string op;       ///< "" for collectives that do not reduce
  std::string algo;     ///< the algorithm asked for; "auto" when the group chose
  std::string chosen;   ///< with "auto": what the group's cost model picked, per explain() ("" if unknown)
  std::size_t bytes = 0, count = 0;
  bool inplace = false;
  int world = 1;
  /// mean, min, max: across the ranks' mean times; p50, p99: over the iterations, each iteration's time being
  /// its slowest rank's.
  Summary time_us;
  /// The slowest rank's loop period (LocalResult::loop_us): a call's share of a back-to-back loop, the work between
  /// calls included, which the per-call times above leave out.
  double loop_us = 0;
  double algbw_gbps = 0, busbw_gbps = 0;  ///< from time_us.mean
  std::size_t wrong = 0;
  int slowest_rank = -1;
  double slowest_excess = 0;              ///< slowest rank's mean / fastest rank's mean - 1
  std::optional<double> vs_mpi;           ///< this row's mean time / MPI's at the same size (dcomm rows)
  std::string skipped;                    ///< non-empty: not run, and why
  std::vector<RankStats> ranks;
};

/// Combines every rank's measurements (index = rank) into a row.
Row make_row(const Case& c, const std::string& library, const std::vector<LocalResult>& per_rank);
/// A row for a case the library cannot run.
Row skipped_row(const Case& c, const std::string& library, const std::string& why);

/// LocalResult <-> store value.
Store::Bytes encode(const LocalResult& r);
LocalResult decode(const Store::Bytes& b);

}  // namespace dcomm::bench
