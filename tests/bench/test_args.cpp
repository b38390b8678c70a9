// dcomm-bench's command line: defaults, size suffixes, "all", and one clear line with exit 2 for every mistake.

#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dcomm_config.h"
#include "tools/bench/args.hpp"
#include "tools/bench/plan.hpp"

using namespace dcomm;
using namespace dcomm::bench;

namespace {

struct Parsed {
  int code;
  Options opts;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dcomm-bench");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.code = parse_args(static_cast<int>(argv.size()), argv.data(), &p.opts, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

// Exit 2 with exactly one line that starts "dcomm-bench: error: " and mentions `needle`.
void require_usage_error(std::vector<std::string> args, const std::string& needle) {
  Parsed p = parse(std::move(args));
  CHECK(p.code == 2);
  CHECK(p.err.rfind("dcomm-bench: error: ", 0) == 0);
  CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  CHECK(p.err.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("defaults follow nccl-tests' flags", "[bench][args]") {
  Parsed p = parse({"all_reduce"});
  REQUIRE(p.code == -1);
  CHECK(p.opts.colls == std::vector<Coll>{Coll::kAllReduce});
  CHECK(p.opts.min_bytes == 8);
  CHECK(p.opts.max_bytes == 8u << 20);
  CHECK(p.opts.factor == 2);
  CHECK(p.opts.iters == 20);
  CHECK(p.opts.warmup == 5);
  CHECK(p.opts.dtypes == std::vector<DType>{DType::kFloat32});
  CHECK(p.opts.ops == std::vector<ReduceOp>{ReduceOp::kSum});
  CHECK(p.opts.algo == "auto");
  CHECK(p.opts.device == Device::Kind::kHost);
  CHECK_FALSE(p.opts.check);
  CHECK_FALSE(p.opts.vs_mpi);
  CHECK(p.opts.timeout_s == 60);
  CHECK(p.opts.stall_rank == -1);
}

TEST_CASE("sizes take K, M and G suffixes; all expands", "[bench][args]") {
  Parsed p = parse({"all", "-b", "4K", "-e", "1M", "-f", "4", "-n", "3", "-w", "0", "-d", "all", "-o", "all",
                    "--algo", "ring", "--inplace", "--check", "--timeout", "2.5", "--json", "r.json", "-r", "1"});
  REQUIRE(p.code == -1);
  CHECK(p.opts.colls.size() == 10);
  CHECK(p.opts.min_bytes == 4096);
  CHECK(p.opts.max_bytes == 1u << 20);
  CHECK(p.opts.factor == 4);
  CHECK(p.opts.iters == 3);
  CHECK(p.opts.warmup == 0);
  CHECK(p.opts.dtypes.size() == std::size(kAllDTypes));
  CHECK(p.opts.ops.size() == std::size(kAllReduceOps));
  CHECK(p.opts.algo == "ring");
  CHECK(p.opts.inplace);
  CHECK(p.opts.check);
  CHECK(p.opts.timeout_s == 2.5);
  CHECK(p.opts.json_path == "r.json");
  CHECK(p.opts.root == 1);
  CHECK(p.opts.argv.size() == 26);  // the program name and 25 arguments
}

TEST_CASE("--help prints the options and exits 0", "[bench][args]") {
  Parsed p = parse({"--help"});
  CHECK(p.code == 0);
  CHECK(p.out.find("--vs") != std::string::npos);
  CHECK(p.out.find("--test-stall") == std::string::npos);  // the test hook stays hidden
}

TEST_CASE("bad arguments get one line and exit 2", "[bench][args]") {
  require_usage_error({"allreduce"}, "unknown collective 'allreduce'");
  require_usage_error({}, "collective");
  require_usage_error({"all_reduce", "-b", "1M", "-e", "1K"}, "larger than max size");
  require_usage_error({"all_reduce", "-b", "12Q"}, "-b '12Q' is not a size");
  require_usage_error({"all_reduce", "-e", "-3"}, "");
  require_usage_error({"all_reduce", "-d", "float128"}, "unknown dtype 'float128'");
  require_usage_error({"all_reduce", "-o", "mean"}, "unknown op 'mean'");
  require_usage_error({"all_reduce", "-d", "float32", "-o", "band"}, "op band does not fit dtype float32");
  require_usage_error({"all_reduce", "-f", "1"}, "factor must be at least 2");
  require_usage_error({"all_reduce", "-n", "0"}, "at least one iteration");
  require_usage_error({"all_reduce", "-r", "-1"}, "root");
  require_usage_error({"all_reduce", "--timeout", "0"}, "--timeout");
  require_usage_error({"all_reduce", "--vs", "nccl"}, "--vs");
  require_usage_error({"all_reduce", "--device", "tpu"}, "--device");
  require_usage_error({"all_reduce", "--algo", ""}, "--algo");
  require_usage_error({"all_reduce", "--bogus"}, "--bogus");
  if (!DCOMM_HAVE_MPI) require_usage_error({"all_reduce", "--vs", "mpi"}, "without MPI");
  if (!DCOMM_HAVE_CUDA) require_usage_error({"all_reduce", "--device", "cuda"}, "without CUDA");
}

TEST_CASE("with -d all or -o all, unfit pairs are left to the plan instead of refused", "[bench][args]") {
  CHECK(parse({"all_reduce", "-d", "all", "-o", "band"}).code == -1);
  CHECK(parse({"all_reduce", "-d", "float32", "-o", "all"}).code == -1);
}

TEST_CASE("--algo takes a comma-separated list; a name no collective knows is refused", "[bench][args]") {
  require_usage_error({"all_reduce", "--algo", "ring,"}, "separated by commas");
  require_usage_error({"all_reduce", "--algo", ",auto"}, "separated by commas");
  CHECK(split_algos("ring,auto,hier") == std::vector<std::string>{"ring", "auto", "hier"});
  // all_reduce knows ring and tree, broadcast knows tree and scatter_allgather.
  auto registry = [](Collective c) {
    return std::optional<std::vector<std::string>>(
        c == Collective::kAllReduce ? std::vector<std::string>{"ring", "tree"}
                                    : std::vector<std::string>{"tree", "scatter_allgather"});
  };
  Options o = parse({"all_reduce", "--algo", "ring,auto,ring"}).opts;
  std::vector<Group> g = plan(o, 4, registry);
  REQUIRE(g.size() == 1);
  CHECK(g[0].algos == std::vector<std::string>{"ring", ""});  // in the order given, once each; "" is auto
  o = parse({"all_reduce", "--algo", "tree,all"}).opts;
  CHECK(plan(o, 4, registry)[0].algos == std::vector<std::string>{"tree", "ring"});
  // A list may name algorithms of different collectives: each collective runs the ones it has.
  o.colls = {Coll::kAllReduce, Coll::kBroadcast};
  o.algo = "ring,scatter_allgather";
  g = plan(o, 4, registry);
  REQUIRE(g.size() == 2);
  CHECK(g[0].algos == std::vector<std::string>{"ring"});
  CHECK(g[1].algos == std::vector<std::string>{"scatter_allgather"});
  // A typo in a list is an error, even when the other names run.
  o.algo = "ring,rign";
  CHECK_THROWS_WITH(plan(o, 4, registry), Catch::Contains("unknown algorithm 'rign'"));
  // A name not yet registered (a newer algorithm) is refused the same way.
  o.colls = {Coll::kAllReduce};
  o.algo = "hier,ring";
  CHECK_THROWS_WITH(plan(o, 4, registry), Catch::Contains("unknown algorithm 'hier' for all_reduce"));
}
