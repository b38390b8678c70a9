#pragma once
// dcomm-bench's command line: nccl-tests' flags (-b -e -f -n -w -d -o -r) plus dcomm's (--algo, --device,
// --check, --vs mpi, --json, --csv, --timeout). Parsing checks everything it can without joining the world.

#include <dcomm/types.hpp>

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "tools/bench/coll.hpp"

namespace dcomm::bench {

struct Options {
  std::vector<Coll> colls;
  std::size_t min_bytes = 8;
  std::size_t max_bytes = 8u << 20;
  std::size_t factor = 2;
  int iters = 20;
  int warmup = 5;
  std::vector<DType> dtypes{DType::kFloat32};
  std::vector<ReduceOp> ops{ReduceOp::kSum};
  int root = 0;
  std::string algo = "auto";  ///< comma-separated: "auto" (the group's choice), "all" (every registered one), names
  Device::Kind device = Device::Kind::kHost;
  bool inplace = false;
  bool check = false;
  bool fresh = false;
  bool vs_mpi = false;
  std::string json_path;
  std::string rules_path;  ///< --rules-out: the fastest measured row per size as DCOMM_RULES_FILE rules
  std::string csv_path;
  double timeout_s = 60;
  /// Hidden test hook (--test-stall RANK): that rank never arrives at the first size, to exercise the
  /// timeout report.
  int stall_rank = -1;
  std::vector<std::string> argv;  ///< the command line as given, for the JSON report
};

/// The premul_sum scale the bench uses (a power of two, so checked results stay exact).
inline constexpr double kPreMulScale = 2.0;

/// Parses argv into *opts. Returns -1 to go on, or the exit status: 0 after --help (printed to `out`), 2 after a
/// bad argument (one line "dcomm-bench: error: ..." on `err`).
/// --algo's comma-separated entries ("ring,auto" -> {"ring", "auto"}), empty ones kept so parsing can refuse them.
std::vector<std::string> split_algos(const std::string& algo);

int parse_args(int argc, const char* const* argv, Options* opts, std::ostream& out, std::ostream& err);

}  // namespace dcomm::bench
