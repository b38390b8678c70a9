// dcomm-bench: the collective micro-benchmark. nccl-tests' interface, OSU's statistics, and MPI beside dcomm in
// the same run. See docs/benchmark.md.

#include <dcomm/dcomm.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

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

// Whether a launcher (dcomm-run, torchrun, mpirun, Slurm) or the user set up a world in the environment.
bool launched() {
  for (const char* name : {"WORLD_SIZE", "DCOMM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "RANK",
                           "DCOMM_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
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
  // Started by hand, without any launcher: a world of one, as nccl-tests runs in a single process.
  dcomm::InitOptions init_opts;
  if (!launched()) {
    init_opts.rank = 0;
    init_opts.world_size = 1;
    init_opts.store = dcomm::make_memory_store();
  }
  dcomm::ProcessGroupPtr pg = dcomm::init(init_opts);
  std::vector<Group> groups;
  try {
    groups = plan(opts, pg->size(), registered_algorithms);
  } catch (const UsageError& e) {
    // Every rank finds the same mistake; rank 0 says it, and the others wait until it has, so that the
    // launcher does not stop rank 0 before its line is out.
    auto store = dcomm::make_prefix_store("bench/", pg->store());
    if (pg->rank() == 0) {
      std::cerr << "dcomm-bench: error: " << e.what() << std::endl;
      store->set("usage_reported", std::string("1"));
    } else {
      store->wait({"usage_reported"}, std::chrono::seconds(10));
    }
    return 2;
  }
  std::vector<std::unique_ptr<Library>> libs;
  libs.push_back(make_dcomm_library(pg));
#if DCOMM_HAVE_MPI
  if (opts.vs_mpi) libs.push_back(make_mpi_library(pg, opts.timeout_s));
#endif
  std::vector<Row> rows = Sweep(opts, pg, std::move(libs)).run(groups, std::cout);
  if (pg->rank() != 0) return 0;
  if (!opts.json_path.empty()) write_file(opts.json_path, to_json(opts, pg->size(), rows));
  if (!opts.csv_path.empty()) write_file(opts.csv_path, to_csv(rows));
  if (!opts.rules_path.empty()) {
    write_file(opts.rules_path, to_rules(rows, pg->size(), opts.device == dcomm::Device::Kind::kCuda));
  }
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
    if (!quiet_rank()) {
      std::cerr << err.str();
    } else if (code != 0) {
      // Not joined yet, so no store to wait on: give rank 0 a moment to print before this exit makes the
      // launcher stop the job.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return code;
  }
  try {
    return run(opts);
  } catch (const BenchFailure& e) {
    if (!e.printed) std::cerr << e.what() << "\n";
    return e.exit_code;
  } catch (const std::exception& e) {
    std::cerr << "dcomm-bench: error: " << e.what() << "\n";
    return 1;
  }
}
