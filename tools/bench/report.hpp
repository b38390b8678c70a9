#pragma once
// How results are shown: the nccl-tests-style table on stdout (rank 0), and the JSON and CSV files.

#include <iosfwd>
#include <string>
#include <vector>

#include "tools/bench/args.hpp"
#include "tools/bench/row.hpp"

namespace dcomm::bench {

/// The column header lines, starting with '#'.
std::string table_header(bool vs_mpi);
/// One row as a table line (no newline).
std::string table_line(const Row& row, bool vs_mpi);
/// The footer: average bus bandwidth per collective, library and algorithm, and the total of wrong elements.
std::string table_footer(const std::vector<Row>& rows);

/// Average busbw of the rows that ran, grouped by (collective, library, algorithm), in first-seen order.
struct BusbwAverage {
  std::string collective, library, algorithm;
  double gbps = 0;
};
std::vector<BusbwAverage> average_busbw(const std::vector<Row>& rows);

/// The whole run as JSON (see docs/benchmark.md for the schema) and as CSV, one line per row.
std::string to_json(const Options& opts, int world, const std::vector<Row>& rows);
std::string to_csv(const std::vector<Row>& rows);
/// DCOMM_RULES_FILE rules (collectives/rules.hpp) from dcomm's rows that named an algorithm: at each measured size
/// the row with the lowest p50 (each iteration timed by its slowest rank: robust to the outliers of shared cores)
/// that got every element right; a size's rule reaches halfway (geometrically) to its neighbours, the rules cover
/// the measured sizes only (from the smallest to the largest: the model chooses outside), and neighbours that agree
/// are merged. For `world` ranks; on device buffers when measured so. Not barrier: a latency that wants thousands of
/// calls to rank (a rule from 20 calls on 4 ranks sharing 2 cores made it 1.4x slower, twice); the model keeps it.
std::string to_rules(const std::vector<Row>& rows, int world, bool device);

}  // namespace dcomm::bench
