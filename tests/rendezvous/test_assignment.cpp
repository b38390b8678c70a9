// Rank assignment: the pure rule, the join over a shared TCP store with threads as processes, bootstrap(), and
// inconsistent launches that must fail on every participant instead of hanging.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/store.hpp>

#include "rendezvous/bootstrap.hpp"
#include "rendezvous/exchange.hpp"
#include "rendezvous/member.hpp"
#include "tests/rendezvous/env_guard.hpp"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>

using namespace dcomm;
using dcomm::test::EnvGuard;

namespace {

struct Outcome {
  std::optional<rdzv::Joined> joined;
  std::string error;
  bool invalid_usage = false;
  bool timeout = false;
};

// Runs f(i) on n threads; each records its result or the error it raised (only the main thread asserts).
std::vector<Outcome> on_threads(int n, const std::function<rdzv::Joined(int)>& f) {
  std::vector<Outcome> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        out[i].joined = f(i);
      } catch (const InvalidUsageError& e) {
        out[i].error = e.what();
        out[i].invalid_usage = true;
      } catch (const TimeoutError& e) {
        out[i].error = e.what();
        out[i].timeout = true;
      } catch (const std::exception& e) {
        out[i].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

Identity declared(int world, int rank = -1, const std::string& host = "h", int local_world = -1) {
  Identity id;
  id.world_size = world;
  id.rank = rank;
  id.host_id = host;
  id.local_world_size = local_world;
  id.source = rank >= 0 ? "explicit" : "dynamic";
  return id;
}

// Every identity complete; ranks a permutation; node ranks dense, equal exactly for equal host ids and numbered
// by first appearance in rank order; local ranks dense per node in rank order.
void check_world(const std::vector<Identity>& ids) {
  const int n = static_cast<int>(ids.size());
  std::map<int, const Identity*> by_rank;
  for (const auto& id : ids) by_rank[id.rank] = &id;
  REQUIRE(static_cast<int>(by_rank.size()) == n);
  CHECK(by_rank.begin()->first == 0);
  CHECK(by_rank.rbegin()->first == n - 1);
  std::map<std::string, int> node_of_host;
  std::map<int, int> next_local;
  for (auto& [rank, id] : by_rank) {
    CHECK(id->world_size == n);
    auto [it, fresh] = node_of_host.emplace(id->host_id, static_cast<int>(node_of_host.size()));
    CHECK(id->node_rank == it->second);
    CHECK(id->local_rank == next_local[id->node_rank]++);
  }
  for (auto& [rank, id] : by_rank) {
    CHECK(id->node_count == static_cast<int>(node_of_host.size()));
    CHECK(id->local_world_size == next_local[id->node_rank]);
  }
}

std::vector<Identity> identities(const std::vector<Outcome>& outcomes) {
  std::vector<Identity> ids;
  for (const auto& o : outcomes) {
    INFO(o.error);
    REQUIRE(o.joined);
    ids.push_back(o.joined->identity);
  }
  return ids;
}

constexpr auto kJoinTimeout = std::chrono::seconds(20);

}  // namespace

TEST_CASE("assign: ranks in join order, nodes by first appearance, local ranks dense", "[assign]") {
  const char* hosts[] = {"b", "a", "b", "c", "a", "b", "c"};
  std::vector<rdzv::Member> ms;
  for (const char* h : hosts) ms.push_back(rdzv::make_member(declared(7, -1, h), ""));
  auto ids = rdzv::assign_identities(ms);
  check_world(ids);
  CHECK(ids[0].node_rank == 0);  // "b" appears first
  CHECK(ids[1].node_rank == 1);
  CHECK(ids[3].node_rank == 2);
  CHECK(ids[5].local_rank == 2);
  CHECK(ids[5].local_world_size == 3);
  // Records survive their encoding.
  auto back = rdzv::decode_member(rdzv::encode_member(ms[3]), "k");
  CHECK(back.declared.host_id == "c");
  CHECK(back.nonce == ms[3].nonce);
  CHECK(back.error.empty());
  CHECK_THROWS_AS(rdzv::decode_member("not a record", "k"), Error);
}

TEST_CASE("assign: declared ranks order the nodes; declared local ranks are kept", "[assign]") {
  std::vector<rdzv::Member> ms;
  int ranks[] = {3, 0, 2, 1, 4};
  const char* hosts[] = {"y", "x", "y", "x", "z"};
  for (int i = 0; i < 5; ++i) ms.push_back(rdzv::make_member(declared(5, ranks[i], hosts[i]), ""));
  auto ids = rdzv::assign_identities(ms);
  check_world(ids);
  CHECK(ids[1].node_rank == 0);  // rank 0 is on x
  CHECK(ids[0].node_rank == 1);
  CHECK(ids[4].node_count == 3);

  ms[0].declared.local_rank = 1;
  ms[1].declared.local_rank = 1;
  ms[2].declared.local_rank = 0;
  ms[3].declared.local_rank = 0;
  ms[4].declared.local_rank = 0;
  ids = rdzv::assign_identities(ms);
  CHECK(ids[1].local_rank == 1);  // rank 0 keeps the local rank its launcher gave
  ms[4].declared.local_rank = -1;
  CHECK_THROWS_WITH(rdzv::assign_identities(ms), Catch::Contains("local rank is given to"));
}

TEST_CASE("join: threads with their own TCP clients get a consistent dynamic world", "[assign][tcp]") {
  auto server = start_tcp_store_server("127.0.0.1", 0);
  for (int n : {1, 2, 7}) {
    auto prefix = fmt::format("world{}/", n);
    auto outcomes = on_threads(n, [&](int i) {
      TcpStoreOptions o;
      o.timeout = kJoinTimeout;
      auto store = make_prefix_store(prefix, connect_tcp_store("127.0.0.1", server->port(), o));
      return rdzv::join_world(declared(n, -1, fmt::format("host{}", i % 3)), "", *store, kJoinTimeout);
    });
    auto ids = identities(outcomes);
    check_world(ids);
    for (int i = 0; i < n; ++i) {
      CHECK(ids[i].host_id == fmt::format("host{}", i % 3));
      CHECK(outcomes[i].joined->world_nonce == outcomes[0].joined->world_nonce);
    }
  }
}

TEST_CASE("join: inconsistent launches fail on every participant", "[assign]") {
  struct Case {
    const char* name;
    std::vector<Identity> decl;
    std::vector<std::string> errors;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"duplicate rank", {declared(3, 0), declared(3, 1), declared(3, 1)}, {}, "rank 1 is claimed by two processes"},
      {"disagreeing world sizes", {declared(3), declared(2), declared(3)}, {}, "disagree on the world size"},
      {"too many local ranks",
       {declared(3, -1, "h", 2), declared(3, -1, "h", 2), declared(3, -1, "h", 2)},
       {},
       "more local ranks than declared"},
      {"out-of-range rank", {declared(3, 0), declared(3, 1), declared(3, 5)}, {"", "", "rank 5 must be below 3"},
       "rank 5 must be below 3"},
  };
  for (auto& c : cases) {
    INFO(c.name);
    auto store = make_memory_store(kJoinTimeout);
    auto outcomes = on_threads(static_cast<int>(c.decl.size()), [&](int i) {
      std::string err = c.errors.empty() ? "" : c.errors[i];
      return rdzv::join_world(c.decl[i], err, *store, std::chrono::seconds(10));
    });
    for (const auto& o : outcomes) {
      INFO(o.error);
      UNSCOPED_INFO(o.error);
      CHECK(o.invalid_usage);
      CHECK_THAT(o.error, Catch::Contains(c.expect));
    }
  }
}

TEST_CASE("join: missing peers time out naming how many joined", "[assign]") {
  auto store = make_memory_store(kJoinTimeout);
  auto outcomes = on_threads(2, [&](int) {
    return rdzv::join_world(declared(3), "", *store, std::chrono::milliseconds(300));
  });
  for (const auto& o : outcomes) {
    CHECK(o.timeout);
    CHECK_THAT(o.error, Catch::Contains("2/3 ranks joined") && Catch::Contains("timeout 300 ms"));
  }
  CHECK_THROWS_WITH(rdzv::join_world(declared(-1), "", *store, kJoinTimeout), Catch::Contains("world size is unknown"));

  // Ranks that declared who they are (a launcher's world): the timeout names the ranks that never arrived.
  auto named = make_memory_store(kJoinTimeout);
  auto partial = on_threads(2, [&](int i) {
    return rdzv::join_world(declared(3, i == 0 ? 0 : 2), "", *named, std::chrono::milliseconds(300));
  });
  for (const auto& o : partial) CHECK_THAT(o.error, Catch::Contains("2/3 ranks joined") && Catch::Contains("rank(s) 1 never joined"));
}

TEST_CASE("bootstrap: threads over a given store, then over a TCP store rank 0 hosts", "[bootstrap][tcp]") {
  EnvGuard env;
  env.set("DCOMM_RUN_ID", "job7").set("DCOMM_RESTART_COUNT", "2");
  auto memory = make_memory_store(kJoinTimeout);
  std::vector<rdzv::Bootstrap> boots(5);
  auto outcomes = on_threads(5, [&](int i) {
    InitOptions o;
    o.world_size = 5;
    o.host_id = i < 2 ? "left" : "right";
    o.store = memory;
    o.timeout = kJoinTimeout;
    boots[i] = rdzv::bootstrap(o);
    return rdzv::Joined{boots[i].identity, 0};
  });
  check_world(identities(outcomes));
  for (auto& b : boots) {
    CHECK(b.world_id == boots[0].world_id);
    CHECK_THAT(b.world_id, Catch::StartsWith("job7-2-"));
    CHECK(b.store->describe() == "prefix 'job7/2/' of memory");
    CHECK(b.timeout == kJoinTimeout);
    CHECK_FALSE(b.server);
  }
  CHECK(memory->check({"job7/2/rdzv/joined"}));

  // Over TCP: rank 0 hosts the store on the master port; the others connect with retry.
  uint16_t port = start_tcp_store_server("127.0.0.1", 0)->port();  // a port that was just free
  env.set("MASTER_ADDR", "127.0.0.1").set("MASTER_PORT", std::to_string(port)).set("DCOMM_TIMEOUT_S", "20");
  std::vector<rdzv::Bootstrap> tcp_boots(4);
  outcomes = on_threads(4, [&](int i) {
    InitOptions o;
    o.rank = 3 - i;
    o.world_size = 4;
    o.host_id = "one-host";
    tcp_boots[i] = rdzv::bootstrap(o);
    return rdzv::Joined{tcp_boots[i].identity, 0};
  });
  check_world(identities(outcomes));
  int hosts = 0;
  for (auto& b : tcp_boots) {
    hosts += b.server ? 1 : 0;
    CHECK((b.server == nullptr || b.identity.rank == 0));
    CHECK(b.timeout == std::chrono::seconds(20));
    CHECK_THAT(b.store->describe(), Catch::Contains(fmt::format("tcp://127.0.0.1:{}", port)));
  }
  CHECK(hosts == 1);
}

TEST_CASE("bootstrap: with no ranks, the first to bind hosts and the rest connect", "[bootstrap][tcp]") {
  EnvGuard env;
  uint16_t port = start_tcp_store_server("127.0.0.1", 0)->port();
  env.set("DCOMM_MASTER_PORT", std::to_string(port)).set("WORLD_SIZE", "3");
  std::vector<rdzv::Bootstrap> boots(3);
  auto outcomes = on_threads(3, [&](int i) {
    InitOptions o;
    o.timeout = kJoinTimeout;
    boots[i] = rdzv::bootstrap(o);
    return rdzv::Joined{boots[i].identity, 0};
  });
  auto ids = identities(outcomes);
  check_world(ids);
  int hosts = 0;
  for (auto& b : boots) {
    hosts += b.server ? 1 : 0;
    CHECK(b.identity.source == "dynamic");
  }
  CHECK(hosts == 1);
  // The server outlives its clients here: destroy the other bootstraps first.
  std::stable_partition(boots.begin(), boots.end(), [](const rdzv::Bootstrap& b) { return b.server != nullptr; });
  while (!boots.empty()) boots.pop_back();
}

TEST_CASE("bootstrap: configuration mistakes are reported as such", "[bootstrap]") {
  EnvGuard env;
  env.set("DCOMM_TIMEOUT_S", "soon");
  CHECK_THROWS_WITH(rdzv::bootstrap({}), Catch::Contains("DCOMM_TIMEOUT_S='soon'"));
  env.set("DCOMM_TIMEOUT_S", "-3");
  CHECK_THROWS_WITH(rdzv::resolve_timeout(kDefaultTimeout), Catch::Contains("positive number of seconds"));
  env.set("DCOMM_TIMEOUT_S", "1.5");
  CHECK(rdzv::resolve_timeout(kDefaultTimeout) == std::chrono::milliseconds(1500));
  CHECK(rdzv::resolve_timeout(std::chrono::seconds(4)) == std::chrono::seconds(4));
  CHECK_THROWS_AS(rdzv::resolve_timeout(std::chrono::milliseconds(-2)), InvalidUsageError);

  env.set("MASTER_PORT", "70000").set("WORLD_SIZE", "2");
  CHECK_THROWS_WITH(rdzv::bootstrap({}), Catch::Contains("port 70000 (MASTER_PORT)"));

  // An out-of-range rank whose store is unreachable reports the rank, not just the store.
  uint16_t closed = start_tcp_store_server("127.0.0.1", 0)->port();
  env.set("MASTER_PORT", std::to_string(closed)).set("DCOMM_STORE_HOSTED", "1").set("RANK", "5");
  InitOptions o;
  o.timeout = std::chrono::milliseconds(200);
  try {
    rdzv::bootstrap(o);
    FAIL("bootstrap succeeded");
  } catch (const InvalidUsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 5 (RANK=5) must be below world size 2 (WORLD_SIZE=2)") &&
                                          Catch::Contains("unreachable"));
  }
}
