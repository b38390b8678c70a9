// Unit tests of dcomm-run's parts that need no processes: the command line, the ranks' environment, the line
// forwarder, and the failure summary.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/run/options.hpp"
#include "tools/run/output_pump.hpp"
#include "tools/run/rank_env.hpp"
#include "tools/run/stderr_tail.hpp"
#include "tools/run/summary.hpp"
#include "tests/launcher/parse_helpers.hpp"

using namespace dcomm::run;
using dcomm::run::test::parse;
using dcomm::run::test::parse_error;

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("command line: options, defaults and the program after --") {
  LaunchOptions o = parse({"--nproc-per-node", "3", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.1.2.3",
                           "--max-restarts", "2", "--grace-period", "0.25", "--host-id", "h", "--", "prog", "--x",
                           "--", "y"});
  CHECK(o.nproc_per_node == 3);
  CHECK(o.nnodes == 2);
  CHECK(o.node_rank == 1);
  CHECK(o.master_addr == "10.1.2.3");
  CHECK(o.master_port == kDefaultMasterPort);  // several nodes need a fixed port
  CHECK(o.max_restarts == 2);
  CHECK(o.grace_period == std::chrono::milliseconds(250));
  CHECK(o.host_id == "h");
  CHECK(o.host_store);
  CHECK(o.command == std::vector<std::string>{"prog", "--x", "--", "y"});
  CHECK(o.world_size() == 6);

  LaunchOptions single = parse({"--nproc-per-node", "1", "prog", "--flag"});
  CHECK(single.master_port == 0);  // one node: a free port
  CHECK(single.command == std::vector<std::string>{"prog", "--flag"});

  LaunchOptions standalone = parse({"--standalone", "--nproc-per-node", "2", "--", "p"});
  CHECK((standalone.master_addr == "127.0.0.1" && standalone.master_port == 0));

  LaunchOptions endpoint =
      parse({"--nproc-per-node", "2", "--nnodes", "2", "--rdzv-endpoint", "[::1]:7000", "--", "p"});
  CHECK((endpoint.master_addr == "::1" && endpoint.master_port == 7000 && !endpoint.host_store));
}

TEST_CASE("command line: mistakes name the option and the value") {
  CHECK(parse_error({"--nproc-per-node", "2"}).starts_with("no program to run"));
  CHECK(parse_error({"--nproc-per-node", "0", "--", "p"}) == "--nproc-per-node must be at least 1 (got 0)");
  CHECK(parse_error({"--nproc-per-node", "1", "--nnodes", "3", "--node-rank", "3", "--", "p"}) ==
        "--node-rank must be in [0, 3) for --nnodes 3 (got 3)");
  CHECK(parse_error({"--nproc-per-node", "1", "--rdzv-endpoint", "h:0", "--", "p"}).find("[1, 65535]") !=
        std::string::npos);
  CHECK(parse_error({"--nproc-per-node", "1", "--nnodes", "2", "--standalone", "--", "p"}).find("--standalone") !=
        std::string::npos);
  CHECK(parse_error({"--nproc-per-node", "1", "-z", "p"}).starts_with("unknown option '-z'"));
  // A typo is named, with the option it is near, before any "is required".
  CHECK(parse_error({"--nproc-per-nod", "2", "--", "p"}) ==
        "unknown option '--nproc-per-nod'; did you mean --nproc-per-node? (options go before the program; put the "
        "program after --)");
  CHECK(parse_error({"--max_restart=2", "--", "p"}).find("did you mean --max_restarts?") != std::string::npos);
  CHECK(parse_error({"--frobnicate", "--", "p"}).find("did you mean") == std::string::npos);
  CHECK(parse_error({"--nproc-per-node", "1", "--grace-period", "-1", "--", "p"}).starts_with("--grace-period"));
}

TEST_CASE("endpoints") {
  std::string host;
  int port = 0;
  parse_endpoint("node-a:29500", &host, &port);
  CHECK((host == "node-a" && port == 29500));
  for (const char* bad : {"", ":1", "h", "h:", "h:x", "h:65536", "[::1:5", "h:123456"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_endpoint(bad, &host, &port), UsageError);
  }
}

TEST_CASE("each rank's variables, and merging them over the inherited environment") {
  LaunchOptions o = parse({"--nproc-per-node", "3", "--nnodes", "3", "--node-rank", "2", "--master-port", "4000",
                           "--host-id", "hx", "--", "p"});
  RoundInfo round{"00112233aabbccdd", 2, "10.0.0.9", 4000, true, "", 4001};
  std::vector<std::string> vars = rank_variables(o, round, 1);
  auto has = [&](const std::string& entry) { return std::find(vars.begin(), vars.end(), entry) != vars.end(); };
  for (const char* e : {"RANK=7", "DCOMM_RANK=7", "WORLD_SIZE=9", "DCOMM_WORLD_SIZE=9", "LOCAL_RANK=1",
                        "DCOMM_LOCAL_RANK=1", "LOCAL_WORLD_SIZE=3", "DCOMM_LOCAL_WORLD_SIZE=3", "GROUP_RANK=2",
                        "NODE_RANK=2", "DCOMM_NODE_RANK=2", "DCOMM_NODE_COUNT=3", "MASTER_ADDR=10.0.0.9",
                        "DCOMM_MASTER_ADDR=10.0.0.9", "MASTER_PORT=4001", "DCOMM_MASTER_PORT=4000",
                        "DCOMM_STORE_HOSTED=1", "DCOMM_RUN_ID=00112233aabbccdd", "DCOMM_RESTART_COUNT=2",
                        "TORCHELASTIC_RESTART_COUNT=2", "DCOMM_HOST_ID=hx", "TORCHELASTIC_RUN_ID=00112233aabbccdd",
                        "GROUP_WORLD_SIZE=3", "ROLE_RANK=7", "ROLE_WORLD_SIZE=9", "ROLE_NAME=default",
                        "TORCHELASTIC_MAX_RESTARTS=0", "TORCHELASTIC_USE_AGENT_STORE=False"}) {
    INFO(e);
    CHECK(has(e));
  }
  CHECK(vars.size() == 29);  // and DCOMM_RUN_TTY

  // Elastic: the ranks' store keys follow the round (DCOMM_RESTART_COUNT), torchrun's count the restarts used.
  round.restarts_used = 1;
  vars = rank_variables(o, round, 1);
  CHECK((has("DCOMM_RESTART_COUNT=2") && has("TORCHELASTIC_RESTART_COUNT=1")));

  std::vector<std::string> merged = merge_environment({"PATH=/bin", "RANK=99", "A=b=c"}, {"RANK=7", "NEW=1"});
  CHECK(merged == std::vector<std::string>{"PATH=/bin", "A=b=c", "RANK=7", "NEW=1"});
}

TEST_CASE("the line forwarder joins partial lines, splits endless ones, and keeps a tail") {
  int src[2];
  REQUIRE(::pipe2(src, O_NONBLOCK) == 0);
  // A file, not a pipe, as the destination: more is forwarded than a pipe holds.
  int dst = ::memfd_create("forwarded", 0);
  REQUIRE(dst >= 0);
  {
    LineForwarder f(src[0], dst, "[rank 5]: ", 2);
    auto feed = [&](const std::string& s) {
      REQUIRE(::write(src[1], s.data(), s.size()) == static_cast<ssize_t>(s.size()));
      while (f.pump()) {
      }
    };
    feed("ab");
    feed("c\nd\n\nlast");
    CHECK(f.tail() == std::vector<std::string>{"d", ""});
    const std::string endless(LineForwarder::kMaxLineBytes + 3, 'x');
    feed(endless.substr(0, 40000));
    feed(endless.substr(40000));
    ::close(src[1]);
    while (f.is_open()) f.pump();  // EOF: the partial line goes out with a newline
  }
  ::lseek(dst, 0, SEEK_SET);
  std::string expected = "[rank 5]: abc\n[rank 5]: d\n[rank 5]: \n[rank 5]: last" +
                         std::string(LineForwarder::kMaxLineBytes - 4, 'x') + "\n[rank 5]: xxxxxxx\n";
  CHECK(read_all(dst) == expected);
  ::close(dst);
}

TEST_CASE("exit descriptions, exit codes and the summary") {
  RankExit code;
  code.rank = 5;
  code.local_rank = 1;
  code.node_rank = 1;
  code.host = "n1";
  code.pid = 42;
  code.code = 3;
  code.stderr_tail = {"boom"};
  CHECK(describe_exit(code) == "rank 5 (local rank 1, node 1, host n1, pid 42): exit code 3");
  CHECK(describe_failure_briefly(code) == "rank 5 failed (exit code 3)");
  CHECK(exit_code_for(code) == 1);

  RankExit sig = code;
  sig.signaled = true;
  sig.code = SIGSEGV;
  CHECK(describe_status(sig) == "signal 11 SIGSEGV (Segmentation fault)");
  CHECK(exit_code_for(sig) == 128 + SIGSEGV);

  RankExit back = decode_exit(encode_exit(sig));
  CHECK((back.rank == 5 && back.local_rank == 1 && back.node_rank == 1 && back.host == "n1" && back.pid == 42 &&
         back.signaled && back.code == SIGSEGV && back.stderr_tail == sig.stderr_tail));
  CHECK(decode_exit("not json").failed());

  RankExit s2 = code;
  s2.rank = 2;
  RankExit s0 = code;
  s0.rank = 0;
  CHECK(format_failure_summary({code}, {s2, s0}, 6) ==
        "dcomm-run: FAILED: 1 of 6 ranks failed; root cause first:\n"
        "dcomm-run:   [1] rank 5 (local rank 1, node 1, host n1, pid 42): exit code 3\n"
        "dcomm-run:       last 1 stderr lines of rank 5:\n"
        "dcomm-run:         boom\n"
        "dcomm-run: stopped by dcomm-run after the failure: ranks 0, 2\n");
}

TEST_CASE("a crash backtrace does not push the rank's own last lines out of the summary's tail") {
  StderrTail tail(3);
  for (const char* line : {"step 9", "rank 2: about to touch the bad pointer", "really"}) tail.add(line);
  tail.add("[vm:4242:0:4242] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))");
  tail.add("==== backtrace (tid:   4242) ====");
  for (int i = 0; i < 25; ++i) {
    tail.add(fmt::format(" {}  /lib/x86_64-linux-gnu/libucs.so.0(ucs_handle_error+0x2e4) [0x7f2b1c2d{:04x}]", i, i));
  }
  tail.add(" 25  ./a.out() [0x401136]");
  tail.add("=================================");
  CHECK(tail.lines() == std::vector<std::string>{
                            "rank 2: about to touch the bad pointer", "really",
                            "[vm:4242:0:4242] Caught signal 11 (Segmentation fault: address not mapped to object at "
                            "address (nil))",
                            "(28 backtrace lines not shown; see the rank's stderr above)"});
  // Ordinary lines that begin with a number are the rank's own.
  CHECK_FALSE(StderrTail::is_backtrace_line("3 ranks left"));
  CHECK_FALSE(StderrTail::is_backtrace_line("10 /2 = 5"));
  CHECK_FALSE(StderrTail::is_backtrace_line("12  items at 0 cost"));
  CHECK_FALSE(StderrTail::is_backtrace_line("== step =="));
}

TEST_CASE("a rank stopped before the failure leads the summary, and the flight recorder's report follows") {
  RankExit stalled;
  stalled.rank = 1;
  stalled.local_rank = 1;
  stalled.node_rank = 0;
  stalled.host = "vm";
  stalled.pid = 7;
  stalled.stalled = "stopped by signal 19 SIGSTOP (Stopped (signal)) 8.0 s before the first failure and never resumed";
  RankExit timed_out = stalled;
  timed_out.rank = 0;
  timed_out.stalled.clear();
  timed_out.code = 3;
  CHECK(describe_failure_briefly(stalled).find("rank 1 stalled (stopped by signal 19") == 0);
  CHECK(decode_exit(encode_exit(stalled)).stalled == stalled.stalled);
  CHECK(format_failure_summary({stalled, timed_out}, {}, 2, "ranks 0 are in all_reduce #4; rank 1 holds up the call") ==
        "dcomm-run: FAILED: 2 of 2 ranks failed; root cause first:\n"
        "dcomm-run:   [1] rank 1 (local rank 1, node 0, host vm, pid 7): stopped by signal 19 SIGSTOP (Stopped "
        "(signal)) 8.0 s before the first failure and never resumed\n"
        "dcomm-run:   [2] rank 0 (local rank 1, node 0, host vm, pid 7): exit code 3\n"
        "dcomm-run: flight recorder: ranks 0 are in all_reduce #4; rank 1 holds up the call\n");
}

TEST_CASE("--keep-going: the option, and the summary of a run that lost ranks and shrank") {
  CHECK(parse({"--standalone", "--nproc-per-node", "4", "--keep-going", "--", "p"}).keep_going);
  CHECK_FALSE(parse({"--standalone", "--nproc-per-node", "4", "--", "p"}).keep_going);
  RankExit lost;
  lost.rank = 2;
  lost.local_rank = 2;
  lost.node_rank = 0;
  lost.host = "vm";
  lost.pid = 77;
  lost.signaled = true;
  lost.code = SIGKILL;
  CHECK(format_keep_going_summary({lost}, {"the group shrank from 4 to 3 ranks in 90 ms (lost launch rank(s) 2; 1 "
                                           "agreement round(s))"},
                                  4) ==
        "dcomm-run: --keep-going: 1 of 4 rank(s) lost, the rest finished\n"
        "dcomm-run:   lost rank 2 (local rank 2, node 0, host vm, pid 77): signal 9 SIGKILL (Killed)\n"
        "dcomm-run:   the group shrank from 4 to 3 ranks in 90 ms (lost launch rank(s) 2; 1 agreement round(s))\n");
  // A program that never shrank: said so, not hidden.
  CHECK(format_keep_going_summary({lost}, {}, 4).find("recorded no shrink") != std::string::npos);
}
