// dcomm-bench: the collective micro-benchmark. nccl-tests' interface, OSU's statistics, and MPI beside dcomm in
// the same run. See docs/benchmark.md.

#include <dcomm/dcomm.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "dcomm_config.h"
#include "tools/bench/args.hpp"
#include "tools/bench/plan.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/run_dcomm.hpp"
#include "tools/bench/sweep.hpp"
#if DCOMM_HAVE_MPI
#include "tools/bench/run_mpi.hpp"
#endif

namespace {

using namespace dcomm::bench;

// Only one rank of a launched job prints argument errors: the others would repeat the same line.
bool quiet_rank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "DCOMM_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr) return std::atoi(v) != 0;
  }
  return false;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error("dcomm-bench: error: cannot write " + path);
}

int run(const Options& opts) {
  // Under mpirun dcomm finds its rank in OMPI_COMM_WORLD_*; the store still needs an address.
  if (std::getenv("OMPI_COMM_WORLD_RANK") != nullptr) {
    setenv("MASTER_ADDR", "127.0.0.1", 0);
    setenv("MASTER_PORT", "29500", 0);
  }
  dcomm::ProcessGroupPtr pg = dcomm::init();
  std::vector<Group> groups = plan(opts, pg->size(), registered_algorithms);
  std::vector<std::unique_ptr<Library>> libs;
  libs.push_back(make_dcomm_library(pg));
#if DCOMM_HAVE_MPI
  if (opts.vs_mpi) libs.push_back(make_mpi_library(pg, opts.timeout_s));
#endif
  std::vector<Row> rows = Sweep(opts, pg, std::move(libs)).run(groups, std::cout);
  if (pg->rank() != 0) return 0;
  if (!opts.json_path.empty()) write_file(opts.json_path, to_json(opts, pg->size(), rows));
  if (!opts.csv_path.empty()) write_file(opts.csv_path, to_csv(rows));
  std::size_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  std::ostringstream err;
  int code = parse_args(argc, argv, &opts, std::cout, err);
  if (code >= 0) {
    if (!quiet_rank()) std::cerr << err.str();
    return code;
  }
  try {
    return run(opts);
  } catch (const UsageError& e) {
    if (!quiet_rank()) std::cerr << "dcomm-bench: error: " << e.what() << "\n";
    return 2;
  } catch (const BenchFailure& e) {
    std::cerr << e.what() << "\n";
    return e.exit_code;
  } catch (const std::exception& e) {
    std::cerr << "dcomm-bench: error: " << e.what() << "\n";
    return 1;
  }
}
