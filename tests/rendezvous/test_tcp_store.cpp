// The TCP store server against bad input, secrets, dead addresses and port conflicts.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "rendezvous/protocol.hpp"
#include "tests/rendezvous/raw_client.hpp"

#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <thread>

using namespace dcomm;
using dcomm::test::RawClient;
namespace proto = dcomm::rdzv::proto;

namespace {

constexpr auto kGenerous = std::chrono::seconds(20);

TcpStoreOptions opts(Duration timeout = kGenerous, std::string secret = "") {
  TcpStoreOptions o;
  o.timeout = timeout;
  o.secret = std::move(secret);
  return o;
}

std::vector<uint8_t> hello(const std::string& secret = "") {
  return proto::Writer().str(secret).frame(static_cast<uint8_t>(proto::Op::kHello));
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The server still answers a normal client and still holds the key set before the abuse.
void expect_still_serving(const TcpStoreServer& server, int round) {
  auto c = connect_tcp_store("127.0.0.1", server.port(), opts());
  CHECK(c->get_string("before") == "kept");
  c->set(fmt::format("after/{}", round), std::string("ok"));
  CHECK(c->get_string(fmt::format("after/{}", round)) == "ok");
}

}  // namespace

TEST_CASE("tcp store: bad clients are dropped; the server keeps serving and keeps keys", "[store][tcp]") {
  TcpStoreOptions o = opts();
  o.max_key_bytes = 64;
  o.max_value_bytes = 1024;
  auto server = start_tcp_store_server("127.0.0.1", 0, o);
  connect_tcp_store("127.0.0.1", server->port(), o)->set("before", std::string("kept"));

  // A client blocked in get() on another connection must survive all of it.
  auto waiter = connect_tcp_store("127.0.0.1", server->port(), o);
  std::string waited;
  std::thread wait_thread([&] { waited = waiter->get_string("late"); });

  std::vector<uint8_t> garbage = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'};
  std::vector<uint8_t> bad_magic = hello();
  bad_magic[0] ^= 0xff;
  std::vector<uint8_t> bad_version = hello();
  bad_version[4] = 99;
  std::vector<uint8_t> bad_opcode = hello();
  bad_opcode[5] = 200;
  std::vector<uint8_t> oversize_key =
      concat(hello(), proto::Writer().str(std::string(100000, 'k')).frame(static_cast<uint8_t>(proto::Op::kGet)));
  std::vector<uint8_t> oversize_value_header;
  proto::put_header(oversize_value_header, static_cast<uint8_t>(proto::Op::kSet), 1u << 30);
  oversize_value_header = concat(hello(), oversize_value_header);
  std::vector<uint8_t> set_frame = proto::Writer().str("x").bytes(std::vector<uint8_t>(500, 1)).frame(2);
  std::vector<uint8_t> mid_frame = concat(hello(), std::vector<uint8_t>(set_frame.begin(), set_frame.begin() + 100));
  std::vector<uint8_t> no_hello = proto::Writer().str("before").frame(static_cast<uint8_t>(proto::Op::kGet));
  std::vector<uint8_t> malformed = concat(hello(), proto::Writer().u32(1000).frame(static_cast<uint8_t>(proto::Op::kGet)));

  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    bool expect_drop;  // false: the client hangs up itself (mid-frame)
  };
  std::vector<Case> cases = {{"garbage", garbage, true},          {"bad magic", bad_magic, true},
                             {"bad version", bad_version, true},  {"bad opcode", bad_opcode, true},
                             {"oversize key frame", oversize_key, true},
                             {"oversize value frame", oversize_value_header, true},
                             {"disconnect mid-frame", mid_frame, false},
                             {"request before hello", no_hello, true},
                             {"malformed payload", malformed, true}};
  int round = 0;
  for (auto& c : cases) {
    INFO(c.name);
    RawClient raw(server->port());
    raw.send(c.bytes);
    if (c.expect_drop) {
      CHECK(raw.closed_by_server());
    } else {
      raw.close();
    }
    expect_still_serving(*server, round++);
  }
  connect_tcp_store("127.0.0.1", server->port(), o)->set("late", std::string("arrived"));
  wait_thread.join();
  CHECK(waited == "arrived");
}

TEST_CASE("tcp store: a value over the cap is refused, the connection stays usable", "[store][tcp]") {
  TcpStoreOptions server_opts = opts();
  server_opts.max_value_bytes = 1000;
  auto server = start_tcp_store_server("127.0.0.1", 0, server_opts);
  // The client's own caps are larger, so the request reaches the server and is refused there.
  auto c = connect_tcp_store("127.0.0.1", server->port(), opts());
  try {
    c->set("v", std::vector<uint8_t>(2000, 3));
    FAIL("oversize set accepted");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("max_value_bytes") && Catch::Contains("tcp://127.0.0.1:"));
  }
  c->set("v", std::vector<uint8_t>(1000, 3));
  CHECK(c->get("v").size() == 1000);
  // The client rejects what exceeds its own caps before any I/O.
  TcpStoreOptions small = opts();
  small.max_key_bytes = 8;
  auto strict = connect_tcp_store("127.0.0.1", server->port(), small);
  CHECK_THROWS_AS(strict->get("a-key-longer-than-eight"), InvalidUsageError);
}

TEST_CASE("tcp store: the shared secret admits only clients that know it", "[store][tcp]") {
  auto server = start_tcp_store_server("127.0.0.1", 0, opts(kGenerous, "s3cret"));
  auto good = connect_tcp_store("127.0.0.1", server->port(), opts(kGenerous, "s3cret"));
  good->set("k", std::string("v"));
  CHECK(good->get_string("k") == "v");

  try {
    connect_tcp_store("127.0.0.1", server->port(), opts(std::chrono::seconds(5), "wrong"));
    FAIL("a wrong secret was accepted");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("secret") && Catch::Contains("refused"));
  }
  CHECK_THROWS_AS(connect_tcp_store("127.0.0.1", server->port(), opts(std::chrono::seconds(5))), InvalidUsageError);

  // A raw client that skips the secret never sees a key.
  RawClient raw(server->port());
  raw.send(concat(hello("nope"), proto::Writer().str("k").frame(static_cast<uint8_t>(proto::Op::kGet))));
  CHECK(raw.read_status() == static_cast<int>(proto::Status::kError));
  CHECK(raw.closed_by_server());

  // The environment supplies the secret when the options do not.
  ::setenv("DCOMM_STORE_SECRET", "s3cret", 1);
  auto from_env = connect_tcp_store("127.0.0.1", server->port(), opts());
  ::unsetenv("DCOMM_STORE_SECRET");
  CHECK(from_env->get_string("k") == "v");
  CHECK(good->get_string("k") == "v");
}

TEST_CASE("tcp store: connecting to a closed port fails within the timeout, naming the address", "[store][tcp]") {
  uint16_t port;
  {
    auto server = start_tcp_store_server("127.0.0.1", 0);
    port = server->port();
  }  // stopped: nothing listens there now
  auto start = std::chrono::steady_clock::now();
  try {
    connect_tcp_store("127.0.0.1", port, opts(std::chrono::milliseconds(500)));
    FAIL("connected to a closed port");
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains(fmt::format("tcp://127.0.0.1:{}", port)) && Catch::Contains("refused") &&
                      Catch::Contains("MASTER_ADDR") && Catch::Contains("timeout 500 ms"));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK_THROWS_AS(connect_tcp_store("no-such-host.invalid", port, opts(std::chrono::milliseconds(100))), TimeoutError);
}

TEST_CASE("tcp store: binding a port in use fails naming host and port", "[store][tcp]") {
  auto server = start_tcp_store_server("127.0.0.1", 0);
  try {
    start_tcp_store_server("127.0.0.1", server->port());
    FAIL("bound a port twice");
  } catch (const SystemError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains(fmt::format("127.0.0.1:{}", server->port())) &&
                                          Catch::Contains("in use"));
  }
  CHECK(server->host() == "127.0.0.1");
}

TEST_CASE("tcp store: clients see a stopped server as a remote error, not a hang", "[store][tcp]") {
  auto server = start_tcp_store_server("127.0.0.1", 0);
  auto c = connect_tcp_store("127.0.0.1", server->port(), opts());
  c->set("k", std::string("v"));
  std::string error;
  std::thread t([&] {
    try {
      c->get("never");
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->stop();
  server->stop();  // idempotent
  t.join();
  CHECK_THAT(error, Catch::Contains("closed the connection"));
}

TEST_CASE("tcp store: hundreds of clients on one server", "[store][tcp]") {
  auto server = start_tcp_store_server("127.0.0.1", 0);
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < 300; ++i) clients.push_back(connect_tcp_store("127.0.0.1", server->port(), opts()));
  for (int i = 0; i < 300; ++i) clients[i]->set(fmt::format("c{}", i), std::to_string(i * 3 + 1));
  for (int i = 0; i < 300; ++i) CHECK(clients[(i + 7) % 300]->get_string(fmt::format("c{}", i)) == std::to_string(i * 3 + 1));
  CHECK(clients[0]->num_keys() == 300);
}

TEST_CASE("tcp store: IPv6 loopback", "[store][tcp]") {
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = start_tcp_store_server("::1", 0);
  } catch (const SystemError& e) {
    WARN("no IPv6 loopback here, skipped: " << e.what());
    return;
  }
  auto c = connect_tcp_store("::1", server->port(), opts());
  CHECK(c->describe() == fmt::format("tcp://[::1]:{}", server->port()));
  c->set("six", std::string("v6"));
  CHECK(connect_tcp_store("::1", server->port(), opts())->get_string("six") == "v6");
}
