// The TCP store attacked as a stranger or a careless neighbour would (issue 13), on loopback, bounded in count
// and time: a server in a process of its own (store_server) so that its peak memory is its own.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "rendezvous/protocol.hpp"
#include "tests/rendezvous/raw_client.hpp"
#include "tests/rendezvous/spawn.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

using namespace dcomm;
using dcomm::test::RawClient;
namespace proto = dcomm::rdzv::proto;

namespace {

constexpr const char* kSecret = "abuse-test-secret";

// The store server as a child process; killed and reaped by the destructor.
struct ServerProcess {
  dcomm::test::Spawned proc;
  uint16_t port = 0;

  explicit ServerProcess(std::map<std::string, std::string> env = {{"DCOMM_STORE_SECRET", kSecret}}) {
    // DCOMM_TEST_STORE_SERVER: another build of the server to attack (how the numbers before the fix were taken).
    const char* other = ::getenv("DCOMM_TEST_STORE_SERVER");
    const char* build = ::getenv("DCOMM_BUILD_DIR");
    std::string program =
        other != nullptr ? other : std::string(build != nullptr ? build : ".") + "/tests/rendezvous/store_server";
    char tmpl[] = "/tmp/dcomm-abuse-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    REQUIRE(dir != nullptr);
    proc = dcomm::test::spawn(program, env, {"DCOMM_STORE_SECRET", "DCOMM_STORE_SECRET_FILE", "DCOMM_LOG_LEVEL"}, dir,
                              "server");
    for (int i = 0; i < 1000 && port == 0; ++i) {
      std::ifstream f(proc.out_path);
      unsigned p = 0;
      if (f >> p) port = static_cast<uint16_t>(p);
      else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(port != 0);
  }
  ~ServerProcess() {
    std::vector<dcomm::test::Spawned> v{proc};
    ::kill(proc.pid, SIGKILL);
    dcomm::test::reap_all(v, std::chrono::seconds(10));
  }
  /// A line of /proc/<pid>/status in KiB ("VmHWM", "VmRSS").
  long status_kib(const std::string& field) const {
    std::ifstream f(fmt::format("/proc/{}/status", proc.pid));
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
    }
    return -1;
  }
  std::string log() const { return dcomm::test::Spawned::slurp(proc.err_path); }
};

TcpStoreOptions opts(std::string secret = kSecret) {
  TcpStoreOptions o;
  o.timeout = std::chrono::seconds(20);
  o.secret = std::move(secret);
  return o;
}

}  // namespace

TEST_CASE("store abuse: big unauthenticated hellos keep the server's memory bounded", "[store][abuse]") {
  ServerProcess server;
  long before_kib = server.status_kib("VmHWM");
  // 16 connections each announcing a 60 MiB hello and sending it (the issue took the server from 22 MB to 1 GB).
  constexpr int kConns = 16;
  constexpr std::size_t kHello = 60u << 20;
  // Each sends all but the last byte, so that a server that buffers hellos holds all 16 at once (about 1 GB).
  std::vector<uint8_t> chunk(1u << 20, 'x');
  std::vector<std::unique_ptr<RawClient>> conns;
  for (int i = 0; i < kConns; ++i) conns.push_back(std::make_unique<RawClient>(server.port));
  std::vector<std::thread> attackers;
  for (auto& conn : conns) {
    attackers.emplace_back([&chunk, c = conn.get()] {
      proto::Bytes head;
      proto::put_header(head, static_cast<uint8_t>(proto::Op::kHello), static_cast<uint32_t>(kHello));
      if (!c->send_all(head)) return;
      for (std::size_t left = kHello - 1; left > 0; left -= std::min(left, chunk.size())) {
        // The server hung up: what we want.
        if (!c->send_all(std::vector<uint8_t>(chunk.begin(), chunk.begin() + std::min(left, chunk.size())))) return;
      }
    });
  }
  for (auto& t : attackers) t.join();
  long peak_kib = server.status_kib("VmHWM");
  fmt::print(stderr, "{}\n", fmt::format("store server peak RSS: {} KiB before the attack, {} KiB after", before_kib, peak_kib));
  CHECK(peak_kib - before_kib < 32 * 1024);
  for (auto& conn : conns) CHECK(conn->closed_by_server());
  auto c = connect_tcp_store("127.0.0.1", server.port, opts());
  c->set("k", std::string("v"));
  CHECK(c->get_string("k") == "v");
}

TEST_CASE("store abuse: partial headers and a slowloris hello are closed within hello_timeout", "[store][abuse]") {
  TcpStoreOptions o = opts();
  o.hello_timeout = std::chrono::seconds(2);
  auto server = start_tcp_store_server("127.0.0.1", 0, o);
  // 300 connections holding 5 bytes of a header (the issue: they stayed open indefinitely).
  std::vector<std::unique_ptr<RawClient>> partial;
  proto::Bytes hello = proto::Writer().str(kSecret).frame(static_cast<uint8_t>(proto::Op::kHello));
  for (int i = 0; i < 300; ++i) {
    partial.push_back(std::make_unique<RawClient>(server->port()));
    partial.back()->send(proto::Bytes(hello.begin(), hello.begin() + 5));
  }
  // One client sending its hello a byte at a time, 4 bytes a second: it would need 8 s for the whole hello.
  RawClient slow(server->port());
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (std::size_t i = 0; i < hello.size() && !closed; ++i) {
    slow.send(proto::Bytes{hello[i]});
    closed = slow.closed_by_server(std::chrono::milliseconds(250));
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(closed);
  CHECK(elapsed >= std::chrono::milliseconds(1500));
  CHECK(elapsed < std::chrono::seconds(8));
  for (auto& c : partial) CHECK(c->closed_by_server(std::chrono::seconds(5)));
  // An honest client is served all along.
  auto c = connect_tcp_store("127.0.0.1", server->port(), o);
  CHECK(c->add("n", 3) == 3);
}

TEST_CASE("store abuse: an authenticated client stalled inside a frame is closed", "[store][abuse]") {
  TcpStoreOptions o = opts();
  o.stalled_frame_timeout = std::chrono::seconds(1);
  auto server = start_tcp_store_server("127.0.0.1", 0, o);
  RawClient raw(server->port());
  raw.send(proto::Writer().str(kSecret).frame(static_cast<uint8_t>(proto::Op::kHello)));
  CHECK(raw.read_status() == static_cast<int>(proto::Status::kOk));
  proto::Bytes set = proto::Writer().str("k").str("a value").frame(static_cast<uint8_t>(proto::Op::kSet));
  raw.send(proto::Bytes(set.begin(), set.begin() + 15));
  CHECK(raw.closed_by_server(std::chrono::seconds(10)));
  auto c = connect_tcp_store("127.0.0.1", server->port(), o);
  CHECK_FALSE(c->check({"k"}));
  // Idle between frames is fine: a client that says nothing stays connected.
  RawClient idle(server->port());
  idle.send(proto::Writer().str(kSecret).frame(static_cast<uint8_t>(proto::Op::kHello)));
  CHECK(idle.read_status() == static_cast<int>(proto::Status::kOk));
  CHECK_FALSE(idle.closed_by_server(std::chrono::milliseconds(2500)));
}

TEST_CASE("store abuse: strangers beyond max_pending_clients wait; honest clients get in", "[store][abuse]") {
  TcpStoreOptions o = opts();
  o.max_pending_clients = 8;
  o.hello_timeout = std::chrono::seconds(1);
  auto server = start_tcp_store_server("127.0.0.1", 0, o);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawClient>(server->port()));
  // 40 silent strangers, 8 at a time, each closed after 1 s: an honest client gets in within a few seconds.
  auto c = connect_tcp_store("127.0.0.1", server->port(), o);
  CHECK(c->add("n", 1) == 1);
  for (auto& s : idle) CHECK(s->closed_by_server(std::chrono::seconds(15)));
}

TEST_CASE("store abuse: a client of another job is refused, naming both jobs", "[store][abuse]") {
  TcpStoreOptions server_opts = opts();
  server_opts.run_id = "PMIX_NAMESPACE=1001";
  server_opts.world_size = 2;
  auto server = start_tcp_store_server("127.0.0.1", 0, server_opts);
  auto try_connect = [&](const std::string& run_id, int64_t world) {
    TcpStoreOptions o = opts();
    o.timeout = std::chrono::seconds(5);
    o.run_id = run_id;
    o.world_size = world;
    return connect_tcp_store("127.0.0.1", server->port(), o);
  };
  for (auto [run_id, world] : {std::pair<std::string, int64_t>{"PMIX_NAMESPACE=2002", 3}, {"PMIX_NAMESPACE=2002", 2},
                               {"PMIX_NAMESPACE=1001", 3}}) {
    try {
      try_connect(run_id, world);
      FAIL("a client of " << run_id << " world " << world << " was admitted");
    } catch (const InvalidUsageError& e) {
      std::string what = e.what();
      CHECK_THAT(what, Catch::Contains("job PMIX_NAMESPACE=1001 (world size 2)") &&
                           Catch::Contains(fmt::format("job {} (world size {})", run_id, world)) &&
                           Catch::Contains(fmt::format("127.0.0.1:{}", server->port())) &&
                           Catch::Contains("MASTER_PORT"));
    }
  }
  // The same job, or a client that does not say (an older client), is admitted.
  try_connect("PMIX_NAMESPACE=1001", 2)->set("k", std::string("v"));
  CHECK(try_connect("", 0)->get_string("k") == "v");
}

TEST_CASE("store abuse: a wrong or missing secret is refused, naming the store", "[store][abuse]") {
  auto server = start_tcp_store_server("127.0.0.1", 0, opts());
  for (const std::string& secret : {std::string("wrong"), std::string(kSecret) + "x"}) {
    try {
      connect_tcp_store("127.0.0.1", server->port(), opts(secret));
      FAIL("the secret '" << secret << "' was accepted");
    } catch (const InvalidUsageError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("secret does not match") &&
                                            Catch::Contains(fmt::format("127.0.0.1:{}", server->port())));
    }
  }
  // Without any secret (an empty one means the environment's, which the test process does not set).
  RawClient raw(server->port());
  raw.send(proto::Writer().str("").frame(static_cast<uint8_t>(proto::Op::kHello)));
  CHECK(raw.read_status() == static_cast<int>(proto::Status::kError));
  CHECK(raw.closed_by_server());
}

TEST_CASE("store abuse: a server beyond loopback needs a secret or an explicit choice", "[store][abuse]") {
  TcpStoreOptions o;  // no secret; the test process has no DCOMM_STORE_SECRET
  try {
    start_tcp_store_server("0.0.0.0", 0, o);
    FAIL("a server on every interface started without a secret");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("0.0.0.0") && Catch::Contains("DCOMM_STORE_SECRET") &&
                                          Catch::Contains("DCOMM_STORE_INSECURE=1"));
  }
  o.allow_unauthenticated = true;
  auto open = start_tcp_store_server("0.0.0.0", 0, o);
  CHECK(open->port() != 0);
  // An empty bind address means loopback (it was every interface).
  auto local = start_tcp_store_server("", 0, TcpStoreOptions{});
  CHECK(local->host() == "127.0.0.1");
}

TEST_CASE("store abuse: a connect flood does not starve an honest client, and the log stays short", "[store][abuse]") {
  ServerProcess server;
  auto c = connect_tcp_store("127.0.0.1", server.port, opts());
  std::atomic<bool> stop{false};
  std::atomic<long> floods{0};
  std::vector<std::thread> flood;
  for (int t = 0; t < 4; ++t) {
    flood.emplace_back([&, t] {
      while (!stop.load()) {
        try {
          RawClient r(server.port);
          if (t % 2 == 0) {
            r.send({0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8});  // garbage: dropped with a warning
          } else {
            r.reset();  // connect, then RST: a failed receive, also a warning
          }
          floods.fetch_add(1);
        } catch (const std::exception&) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    });
  }
  std::vector<double> rtt_ms;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int64_t expect = 0;
  while (std::chrono::steady_clock::now() < end) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(c->add("n", 1) == ++expect);
    rtt_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& t : flood) t.join();
  std::sort(rtt_ms.begin(), rtt_ms.end());
  double median = rtt_ms[rtt_ms.size() / 2], worst = rtt_ms.back();
  std::string log = server.log();
  long lines = std::count(log.begin(), log.end(), '\n');
  fmt::print(stderr, "connect flood: {} connections in 5 s; {} round trips, median {:.2f} ms, max {:.1f} ms; server "
             "log {} lines\n", floods.load(), rtt_ms.size(), median, worst, lines);
  CHECK(floods.load() > 1000);
  // Bounds for a loaded 2-core machine (docs/store.md): the issue saw 0.3-2 s round trips during such a flood.
  CHECK(median < 50.0);
  CHECK(worst < 1000.0);
  // Folded: a few lines per 10 s interval and kind, not one per connection.
  CHECK(lines < 40);
}

TEST_CASE("store abuse: 1000 clients' adds stay exact", "[store][abuse]") {
  ServerProcess server;
  constexpr int kClients = 1000;
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<std::shared_ptr<Store>> mine;
        for (int i = t; i < kClients; i += kThreads) mine.push_back(connect_tcp_store("127.0.0.1", server.port, opts()));
        for (int round = 0; round < 3; ++round) {
          for (std::size_t i = 0; i < mine.size(); ++i) mine[i]->add("sum", static_cast<int64_t>(t + i * kThreads + 1));
        }
      } catch (const std::exception& e) {
        fmt::print(stderr, "client thread {}: {}\n", t, e.what());
        failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  // Client k (1-based) added k three times.
  CHECK(connect_tcp_store("127.0.0.1", server.port, opts())->add("sum", 0) == 3 * int64_t{kClients} * (kClients + 1) / 2);
}
