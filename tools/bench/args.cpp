#include "tools/bench/args.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <ostream>
#include <stdexcept>

#include "dcomm_config.h"
#include "tools/bench/sizes.hpp"

namespace dcomm::bench {

std::vector<std::string> split_algos(const std::string& algo) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= algo.size()) {
    const std::size_t comma = std::min(algo.find(',', start), algo.size());
    names.push_back(algo.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

namespace {

struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::size_t size_arg(const std::string& flag, const std::string& text) {
  auto v = parse_size(text);
  if (!v) throw ArgError(flag + " '" + text + "' is not a size (use bytes with an optional K, M or G suffix)");
  return *v;
}

std::vector<Coll> colls_arg(const std::string& text) {
  if (text == "all") return {std::begin(kAllColls), std::end(kAllColls)};
  Coll c{};
  if (!parse_coll(text, &c)) {
    std::string names;
    for (Coll k : kAllColls) names += std::string(names.empty() ? "" : ", ") + to_string(k);
    throw ArgError("unknown collective '" + text + "' (expected one of " + names + ", or all)");
  }
  return {c};
}

std::vector<DType> dtypes_arg(const std::string& text) {
  if (text == "all") return {std::begin(kAllDTypes), std::end(kAllDTypes)};
  DType t{};
  if (!parse_dtype(text, &t)) throw ArgError("unknown dtype '" + text + "' (e.g. float32, int8, bfloat16, or all)");
  return {t};
}

std::vector<ReduceOp> ops_arg(const std::string& text) {
  if (text == "all") return {std::begin(kAllReduceOps), std::end(kAllReduceOps)};
  ReduceOp op{};
  if (!parse_reduce_op(text, &op)) throw ArgError("unknown op '" + text + "' (e.g. sum, max, band, or all)");
  return {op};
}

// Throws ArgError for combinations no run could satisfy. `named_*`: the user named one rather than "all"
// (with "all", the unfit pairs are skipped rather than refused).
void validate(const Options& o, bool named_dtype, bool named_op) {
  if (o.min_bytes > o.max_bytes) {
    throw ArgError("min size " + std::to_string(o.min_bytes) + " B (-b) is larger than max size " +
                   std::to_string(o.max_bytes) + " B (-e)");
  }
  if (o.factor < 2) throw ArgError("-f " + std::to_string(o.factor) + ": the size factor must be at least 2");
  if (o.iters < 1) throw ArgError("-n " + std::to_string(o.iters) + ": need at least one iteration");
  if (o.warmup < 0) throw ArgError("-w " + std::to_string(o.warmup) + ": warmup cannot be negative");
  if (o.root < 0) throw ArgError("-r " + std::to_string(o.root) + ": the root must be a rank (>= 0)");
  if (!(o.timeout_s > 0)) throw ArgError("--timeout must be positive seconds");
  if (named_dtype && named_op && !op_fits_dtype(o.ops[0], o.dtypes[0])) {
    throw ArgError(std::string("op ") + to_string(o.ops[0]) + " does not fit dtype " + to_string(o.dtypes[0]) +
                   " (bitwise ops need an integer dtype)");
  }
  if (o.device == Device::Kind::kCuda && !DCOMM_HAVE_CUDA) {
    throw ArgError("--device cuda: this dcomm was built without CUDA");
  }
  if (o.vs_mpi && !DCOMM_HAVE_MPI) throw ArgError("--vs mpi: this dcomm-bench was built without MPI");
}

}  // namespace

int parse_args(int argc, const char* const* argv, Options* opts, std::ostream& out, std::ostream& err) {
  Options& o = *opts;
  o.argv.assign(argv, argv + argc);
  CLI::App app{"dcomm-bench: collective micro-benchmark (nccl-tests flags, OSU statistics, MPI beside it)",
               "dcomm-bench"};
  std::string coll = "all_reduce", min_b = "8", max_b = "8M", dtype = "float32", op = "sum", device = "host", vs;
  app.add_option("collective", coll, "all_reduce, broadcast, reduce, scatter, gather, all_gather, reduce_scatter, "
                                     "all_to_all, barrier, sendrecv, or all")->required();
  app.add_option("-b,--minbytes", min_b, "smallest size (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_b, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between steps")->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations per size")->capture_default_str();
  app.add_option("-d,--datatype", dtype, "element type, or all")->capture_default_str();
  app.add_option("-o,--op", op, "reduction op, or all")->capture_default_str();
  app.add_option("-r,--root", o.root, "root rank of rooted collectives")->capture_default_str();
  app.add_option("--algo", o.algo, "algorithm names (comma-separated), all, or auto")->capture_default_str();
  app.add_option("--device", device, "buffer memory")->check(CLI::IsMember({"host", "cuda"}))->capture_default_str();
  app.add_flag("--inplace", o.inplace, "in-place forms of the collectives");
  app.add_flag("--check", o.check, "verify every iteration's result");
  app.add_flag("--fresh", o.fresh,
               "write every call's inputs just before it and align the ranks (untimed): single copies then read "
               "lines still in the writer's cache, as a program's do");
  app.add_option("--json", o.json_path, "write the results as JSON");
  app.add_option("--csv", o.csv_path, "write the results as CSV");
  app.add_option("--rules-out", o.rules_path,
                 "write the fastest algorithm measured at each size as rules for DCOMM_RULES_FILE (use --algo all)");
  app.add_option("--vs", vs, "run the same collectives through a peer library too")->check(CLI::IsMember({"mpi"}));
  app.add_option("--timeout", o.timeout_s, "seconds a collective may take before it is reported stuck")
      ->capture_default_str();
  app.add_option("--test-stall", o.stall_rank, "")->group("");  // hidden: see Options::stall_rank
  try {
    app.parse(argc, argv);
    o.colls = colls_arg(coll);
    o.min_bytes = size_arg("-b", min_b);
    o.max_bytes = size_arg("-e", max_b);
    o.dtypes = dtypes_arg(dtype);
    o.ops = ops_arg(op);
    o.device = device == "cuda" ? Device::Kind::kCuda : Device::Kind::kHost;
    o.vs_mpi = vs == "mpi";
    for (const std::string& a : split_algos(o.algo)) {
      if (a.empty()) throw ArgError("--algo needs names, all, or auto, separated by commas (got '" + o.algo + "')");
    }
    validate(o, dtype != "all", op != "all");
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "dcomm-bench: error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const ArgError& e) {
    err << "dcomm-bench: error: " << e.what() << "\n";
    return 2;
  }
  return -1;
}

}  // namespace dcomm::bench
