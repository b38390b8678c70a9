// torchrun's vocabulary on dcomm-run's command line: each flag parsed, applied or refused with a clear message,
// and the variables torchrun's agent sets.

#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/launcher/parse_helpers.hpp"
#include "tools/run/rank_env.hpp"
#include "tools/run/torch_compat.hpp"

using namespace dcomm::run;
using dcomm::run::test::parse;
using dcomm::run::test::parse_error;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("torchrun: --nnodes N, N:N, elastic MIN:MAX and its bad forms") {
  CHECK(parse({"--nproc-per-node", "1", "--nnodes", "2:2", "--node-rank", "1", "--", "p"}).nnodes == 2);
  CHECK(parse({"--nproc-per-node", "1", "--nnodes", "3", "--node-rank", "2", "--", "p"}).nnodes == 3);
  LaunchOptions e = parse({"--nproc-per-node", "1", "--nnodes", "2:4", "--rdzv-conf", "last_call_timeout=2,join_timeout=9",
                           "--monitor-interval", "0.5", "--", "p"});
  CHECK((e.elastic() && e.nnodes_min == 2 && e.nnodes == 4));
  CHECK((e.last_call_timeout == std::chrono::seconds(2) && e.rdzv_timeout == std::chrono::seconds(9)));
  CHECK(e.monitor_interval == std::chrono::milliseconds(500));
  CHECK(!parse({"--nproc-per-node", "1", "--nnodes", "3:3", "--node-rank", "2", "--", "p"}).elastic());
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", "2:x", "--", "p"}), "not N or MIN:MAX"));
  for (const char* bad : {":3", "2:", "1:2:3", "-1:2", "a:b", " 1:2"}) {
    INFO(bad);
    CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", bad, "--", "p"}), "not N or MIN:MAX"));
  }
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", "3:2", "--", "p"}),
                 "--nnodes 3:2: MIN:MAX needs 1 <= MIN <= MAX (got MIN 3, MAX 2)"));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", "0:2", "--", "p"}), "needs 1 <= MIN <= MAX"));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", "1:2", "--node-rank", "1", "--", "p"}),
                 "node ranks are assigned at each rendezvous round"));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--nnodes", "1:2", "--standalone", "--", "p"}), "--standalone"));
}

TEST_CASE("torchrun: --nproc-per-node count, cpu, gpu, auto") {
  cpu_set_t set;
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  const int cpus = CPU_COUNT(&set);
  CHECK(parse({"--nproc-per-node", "cpu", "--", "p"}).nproc_per_node == cpus);
  ::setenv("CUDA_VISIBLE_DEVICES", "0,3,5", 1);
  CHECK(parse({"--nproc-per-node", "gpu", "--", "p"}).nproc_per_node == 3);
  CHECK(parse({"--nproc-per-node", "auto", "--", "p"}).nproc_per_node == 3);
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  CHECK(parse({"--nproc-per-node", "auto", "--", "p"}).nproc_per_node == cpus);
  CHECK(contains(parse_error({"--nproc-per-node", "gpu", "--", "p"}), "no GPU is visible"));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  CHECK(contains(parse_error({"--nproc-per-node", "tpu", "--", "p"}), "'tpu' is not a count, auto, cpu or gpu"));
  CHECK(parse_error({"--", "p"}) == "--nproc-per-node is required (a count, or auto, cpu, gpu)");
}

TEST_CASE("torchrun: --rdzv-backend c10d|static hosts the store at the endpoint; others refused") {
  for (const char* backend : {"c10d", "static"}) {
    LaunchOptions o = parse({"--nproc-per-node", "1", "--nnodes", "2", "--rdzv-backend", backend, "--rdzv-endpoint",
                             "10.0.0.1:29400", "--rdzv-id", "job7", "--", "p"});
    CHECK(o.host_store);  // node 0's launcher hosts it there, as torchrun's agent does
    CHECK((o.master_addr == "10.0.0.1" && o.master_port == 29400));
    CHECK(o.torch.rdzv_id == "job7");
  }
  CHECK_FALSE(parse({"--nproc-per-node", "1", "--rdzv-endpoint", "h:5", "--", "p"}).host_store);
  std::string e = parse_error({"--nproc-per-node", "1", "--rdzv-backend", "etcd", "--", "p"});
  CHECK(contains(e, "--rdzv-backend etcd is not supported: dcomm-run accepts c10d and static"));
}

TEST_CASE("torchrun: --rdzv-conf, --monitor-interval, --role") {
  LaunchOptions o = parse({"--nproc-per-node", "1", "--rdzv-conf", "join_timeout=42,read_timeout=5,is_host=1",
                           "--monitor-interval", "0.5", "--role", "trainer", "--", "p"});
  CHECK(o.rdzv_timeout == std::chrono::seconds(42));
  CHECK(o.torch.role == "trainer");
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--rdzv-conf", "bogus=1", "--", "p"}),
                 "--rdzv-conf: unknown key 'bogus'"));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--rdzv-conf", "join_timeout=x", "--", "p"}),
                 "join_timeout=x: expected a positive number of seconds"));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--monitor-interval", "0", "--", "p"}),
                 "--monitor-interval must be a positive number"));
  CHECK(parse_error({"--nproc-per-node", "1", "--role", "", "--", "p"}) == "--role must not be empty");
}

TEST_CASE("torchrun: --redirects, --tee, --log-dir, --local-ranks-filter") {
  StreamSpec all = parse_streams("--tee", "3");
  CHECK((all.of(0) == 3 && all.of(7) == 3));
  StreamSpec some = parse_streams("--redirects", "0:1,2:2");
  CHECK((some.of(0) == kStdoutBit && some.of(1) == 0 && some.of(2) == kStderrBit));
  CHECK_THROWS_WITH(parse_streams("--tee", "4"), Catch::Contains("--tee '4': expected 0 (none)"));
  CHECK_THROWS_WITH(parse_streams("--redirects", "a:1"), Catch::Contains("'a:1' is not local_rank:streams"));

  LaunchOptions o = parse({"--nproc-per-node", "3", "--redirects", "0:1", "--tee", "2", "--log-dir", "/tmp/x",
                           "--local-ranks-filter", "0,2", "--", "p"});
  CHECK(o.torch.file_streams(0) == (kStdoutBit | kStderrBit));  // stdout redirected, stderr teed
  CHECK(o.torch.hidden_streams(0) == kStdoutBit);
  CHECK(o.torch.file_streams(1) == kStderrBit);
  CHECK(o.torch.hidden_streams(1) == (kStdoutBit | kStderrBit));  // filtered out
  CHECK(o.torch.hidden_streams(2) == 0);
  // --log-dir alone keeps a copy of both streams.
  LaunchOptions logs = parse({"--nproc-per-node", "1", "--log-dir", "/tmp/x", "--", "p"});
  CHECK((logs.torch.file_streams(0) == 3 && logs.torch.hidden_streams(0) == 0));
  CHECK(contains(parse_error({"--nproc-per-node", "1", "--local-ranks-filter", "0,x", "--", "p"}),
                 "'x' is not a local rank"));
}

TEST_CASE("torchrun: the program: script.py, -m, --run-path, --no-python") {
  using V = std::vector<std::string>;
  CHECK(parse({"--nproc-per-node", "1", "train.py", "--lr", "1"}).command ==
        V{"python3", "-u", "train.py", "--lr", "1"});
  CHECK(parse({"--nproc-per-node", "1", "-m", "pkg.train", "--lr", "1"}).command ==
        V{"python3", "-u", "-m", "pkg.train", "--lr", "1"});
  CHECK(parse({"--nproc-per-node", "1", "--run-path", "t"}).command == V{"python3", "-u", "t"});
  CHECK(parse({"--nproc-per-node", "1", "--no-python", "t.py"}).command == V{"t.py"});
  CHECK(parse({"--nproc-per-node", "1", "--", "./prog", "x"}).command == V{"./prog", "x"});
  CHECK(contains(parse_error({"--nproc-per-node", "1", "-m", "--no-python", "x"}), "exclude each other"));
}

TEST_CASE("torchrun: the agent's variables") {
  LaunchOptions o = parse({"--nproc-per-node", "2", "--nnodes", "3", "--node-rank", "1", "--max-restarts", "4",
                           "--rdzv-id", "job-9", "--role", "trainer", "--", "p"});
  RoundInfo round{"00112233aabbccdd", 0, "10.0.0.9", 4000, false};
  std::vector<std::string> vars = rank_variables(o, round, 1);
  for (const char* e : {"TORCHELASTIC_RUN_ID=job-9", "GROUP_WORLD_SIZE=3", "ROLE_RANK=3", "ROLE_WORLD_SIZE=6",
                        "ROLE_NAME=trainer", "TORCHELASTIC_MAX_RESTARTS=4", "TORCHELASTIC_USE_AGENT_STORE=False"}) {
    INFO(e);
    CHECK(std::find(vars.begin(), vars.end(), e) != vars.end());
  }
}
