// The Store contract, one body run against both the memory store and the TCP store.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "tests/rendezvous/store_fixture.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace dcomm;
using dcomm::test::bytes;
using dcomm::test::StoreFixture;
using namespace std::chrono_literals;

namespace {
constexpr auto kShort = std::chrono::milliseconds(300);
constexpr auto kGenerous = std::chrono::seconds(20);
}  // namespace

TEST_CASE("store: set, get, overwrite and binary values", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  Store& s = *f.store;
  s.set("a", std::string("alpha"));
  CHECK(s.get_string("a") == "alpha");
  s.set("a", std::string("beta"));
  CHECK(s.get_string("a") == "beta");
  Store::Bytes binary = {0, 1, 2, 0, 255, 7};
  s.set("bin", binary);
  CHECK(s.get("bin") == binary);
  s.set("empty", Store::Bytes{});
  CHECK(s.get("empty").empty());
  CHECK(s.check({"a", "bin", "empty"}));
  // A larger value crosses several reads of the server's 64 KiB buffer.
  Store::Bytes big(300 * 1024 + 17);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
  s.set("big", big);
  CHECK(s.get("big") == big);
  CHECK(f.client()->get("big") == big);
}

TEST_CASE("store: get and wait time out naming the keys and the store", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  Store& s = *f.store;
  s.set_timeout(kShort);
  CHECK(s.timeout() == kShort);
  try {
    s.get("never-set");
    FAIL("get of a missing key returned");
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("'never-set'") && Catch::Contains(s.describe()) && Catch::Contains("timeout 300 ms"));
  }
  s.set("here", std::string("1"));
  try {
    s.wait({"here", "missing-1"}, std::chrono::milliseconds(200));
    FAIL("wait for a missing key returned");
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("key 'missing-1' not set") && Catch::Contains("timeout 200 ms"));
  }
  // The store still works after a timeout (the TCP client reconnects).
  CHECK(s.get_string("here") == "1");
  CHECK_THROWS_AS(s.wait({"x"}, std::chrono::milliseconds(-5)), InvalidUsageError);
}

TEST_CASE("store: a blocked get and wait wake when another client sets the keys", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  auto setter = f.client();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    setter->set("k1", std::string("v1"));
    std::this_thread::sleep_for(20ms);
    setter->set("k2", std::string("v2"));
    setter->set("k3", std::string("v3"));
  });
  f.store->wait({"k1", "k2", "k3"});
  CHECK(f.store->get_string("k3") == "v3");
  t.join();
  auto values = f.store->multi_get({"k2", "k1"});
  REQUIRE(values.size() == 2);
  CHECK(values[0] == bytes("v2"));
  CHECK(values[1] == bytes("v1"));
}

TEST_CASE("store: add counts and rejects non-counters", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  Store& s = *f.store;
  CHECK(s.add("c", 5) == 5);
  CHECK(s.add("c", -7) == -2);
  CHECK(s.add("c", 0) == -2);
  CHECK(s.get_string("c") == "-2");
  s.set("text", std::string("hello"));
  CHECK_THROWS_AS(s.add("text", 1), InvalidUsageError);
  CHECK(s.get_string("text") == "hello");
  CHECK(s.add("c", 3) == 1);
}

TEST_CASE("store: compare_set semantics", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  Store& s = *f.store;
  // Missing key, empty expected: created.
  CHECK(s.compare_set("k", {}, bytes("one")) == bytes("one"));
  // Mismatch: unchanged, current value returned.
  CHECK(s.compare_set("k", bytes("zzz"), bytes("two")) == bytes("one"));
  CHECK(s.get_string("k") == "one");
  // Match: swapped.
  CHECK(s.compare_set("k", bytes("one"), bytes("two")) == bytes("two"));
  CHECK(s.get_string("k") == "two");
  // Missing key, non-empty expected: stays missing.
  CHECK(s.compare_set("absent", bytes("x"), bytes("y")).empty());
  CHECK_FALSE(s.check({"absent"}));
}

TEST_CASE("store: delete_key, num_keys, check, multi_set", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  Store& s = *f.store;
  CHECK(s.num_keys() == 0);
  s.multi_set({"m1", "m2", "m3"}, {bytes("1"), bytes("22"), bytes("333")});
  CHECK(s.num_keys() == 3);
  CHECK(s.check({"m1", "m2", "m3"}));
  CHECK_FALSE(s.check({"m1", "m4"}));
  CHECK(s.delete_key("m2"));
  CHECK_FALSE(s.delete_key("m2"));
  CHECK(s.num_keys() == 2);
  CHECK_FALSE(s.check({"m2"}));
  auto v = s.multi_get({"m3", "m1"});
  CHECK(v == std::vector<Store::Bytes>{bytes("333"), bytes("1")});
  CHECK(s.multi_get({}).empty());
  CHECK_THROWS_AS(s.multi_set({"a", "b"}, {bytes("1")}), InvalidUsageError);
}

TEST_CASE("store: 64 clients add concurrently to one counter", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  constexpr int kThreads = 64;
  constexpr int kAdds = 1000;
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kThreads; ++i) clients.push_back(f.client());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        for (int j = 0; j < kAdds; ++j) clients[i]->add("counter", i + 1);
      } catch (...) {
        failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(f.store->add("counter", 0) == int64_t{kAdds} * kThreads * (kThreads + 1) / 2);
}

TEST_CASE("store: threads share one client", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      try {
        for (int j = 0; j < 50; ++j) {
          std::string key = fmt::format("t{}/{}", i, j);
          f.store->set(key, std::to_string(i * 1000 + j));
          if (f.store->get_string(key) != std::to_string(i * 1000 + j)) failures.fetch_add(1);
        }
      } catch (...) {
        failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(f.store->num_keys() == 400);
}

TEST_CASE("store: prefix stores are isolated", "[store]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "tcp");
  StoreFixture f(kind, kGenerous);
  auto a = make_prefix_store("a/", f.store);
  auto b = make_prefix_store("b/", f.client());
  a->set("k", std::string("from a"));
  b->set("k", std::string("from b"));
  CHECK(a->get_string("k") == "from a");
  CHECK(b->get_string("k") == "from b");
  CHECK(f.store->get_string("a/k") == "from a");
  CHECK(a->add("n", 2) == 2);
  CHECK(b->add("n", 5) == 5);
  CHECK_FALSE(b->check({"only-a"}));
  a->set("only-a", std::string("x"));
  CHECK_FALSE(b->check({"only-a"}));
  CHECK(a->delete_key("only-a"));
  a->multi_set({"m"}, {bytes("am")});
  CHECK(a->multi_get({"m", "k"}) == std::vector<Store::Bytes>{bytes("am"), bytes("from a")});
  CHECK(a->describe() == fmt::format("prefix 'a/' of {}", f.store->describe()));
  a->set_timeout(kShort);
  try {
    a->get("nope");
    FAIL("get returned");
  } catch (const TimeoutError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("'a/nope'"));
  }
  CHECK_THROWS_AS(make_prefix_store("x/", nullptr), InvalidUsageError);
}
