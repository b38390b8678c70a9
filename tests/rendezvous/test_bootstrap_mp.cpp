// bootstrap() in real processes: each helper (rdzv_member) is its own process with its own environment, as
// under a launcher. Started with posix_spawn.

#include <catch2/catch.hpp>

#include <dcomm/store.hpp>

#include "tests/rendezvous/env_guard.hpp"
#include "tests/rendezvous/spawn.hpp"

#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

using dcomm::test::Spawned;

namespace {


std::string helper() {
  const char* build = ::getenv("DCOMM_BUILD_DIR");
  return std::string(build != nullptr ? build : ".") + "/tests/rendezvous/rdzv_member";
}

std::string scratch_dir() {
  char tmpl[] = "/tmp/dcomm-rdzv-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  return d;
}

uint16_t free_port() { return dcomm::start_tcp_store_server("127.0.0.1", 0)->port(); }

struct Line {
  int rank, world, local_rank, local_world, node_rank, node_count;
  std::string host_id, source, world_id;
  int hosted;
};

Line parse(const std::string& out) {
  std::istringstream in(out);
  Line l{};
  in >> l.rank >> l.world >> l.local_rank >> l.local_world >> l.node_rank >> l.node_count >> l.host_id >> l.source >>
      l.world_id >> l.hosted;
  return l;
}

std::vector<Spawned> run(int n, const std::function<std::map<std::string, std::string>(int)>& env_of) {
  std::string dir = scratch_dir();
  std::vector<Spawned> procs;
  // The children see only the identity variables each case sets.
  std::vector<std::string> drop(std::begin(dcomm::test::kIdentityVars), std::end(dcomm::test::kIdentityVars));
  for (int i = 0; i < n; ++i) procs.push_back(dcomm::test::spawn(helper(), env_of(i), drop, dir, fmt::format("p{}", i)));
  bool ended = dcomm::test::reap_all(procs, std::chrono::seconds(60));
  CHECK(ended);
  for (auto& p : procs) p.capture();
  std::filesystem::remove_all(dir);
  return procs;
}

}  // namespace

TEST_CASE("bootstrap mp: dynamic ranks across processes and two fake hosts", "[bootstrap][mp]") {
  uint16_t port = free_port();
  auto procs = run(5, [&](int i) {
    return std::map<std::string, std::string>{{"WORLD_SIZE", "5"},
                                              {"MASTER_PORT", std::to_string(port)},
                                              {"DCOMM_HOST_ID", i % 2 == 0 ? "even" : "odd"},
                                              {"DCOMM_RUN_ID", "mp-dyn"},
                                              {"DCOMM_TIMEOUT_S", "30"}};
  });
  std::set<int> ranks;
  std::set<std::string> world_ids;
  int hosts = 0;
  std::map<std::string, std::set<int>> locals;
  std::map<std::string, std::set<int>> nodes;
  for (auto& p : procs) {
    INFO(p.err());
    REQUIRE(p.exit_code == 0);
    Line l = parse(p.out());
    ranks.insert(l.rank);
    world_ids.insert(l.world_id);
    hosts += l.hosted;
    CHECK(l.world == 5);
    CHECK(l.source == "dynamic");
    CHECK(l.node_count == 2);
    CHECK(l.local_world == (l.host_id == "even" ? 3 : 2));
    locals[l.host_id].insert(l.local_rank);
    nodes[l.host_id].insert(l.node_rank);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3, 4});
  CHECK(world_ids.size() == 1);
  CHECK_THAT(*world_ids.begin(), Catch::StartsWith("mp-dyn-0-"));
  CHECK(hosts == 1);
  CHECK(locals["even"] == std::set<int>{0, 1, 2});
  CHECK(locals["odd"] == std::set<int>{0, 1});
  CHECK(nodes["even"].size() == 1);
  CHECK(nodes["odd"].size() == 1);
  CHECK(*nodes["even"].begin() != *nodes["odd"].begin());
}

TEST_CASE("bootstrap mp: torchrun-style ranks, rank 0 hosts", "[bootstrap][mp]") {
  uint16_t port = free_port();
  auto procs = run(3, [&](int i) {
    return std::map<std::string, std::string>{{"RANK", std::to_string(2 - i)}, {"WORLD_SIZE", "3"},
                                              {"MASTER_ADDR", "localhost"}, {"MASTER_PORT", std::to_string(port)},
                                              {"DCOMM_TIMEOUT_S", "30"}};
  });
  for (int i = 0; i < 3; ++i) {
    INFO(procs[i].err());
    REQUIRE(procs[i].exit_code == 0);
    Line l = parse(procs[i].out());
    CHECK(l.rank == 2 - i);
    CHECK(l.source == "torchrun");
    CHECK(l.hosted == (l.rank == 0 ? 1 : 0));
    CHECK(l.node_count == 1);
    CHECK(l.local_rank == l.rank);
  }
}

TEST_CASE("bootstrap mp: a rank claimed twice fails every process", "[bootstrap][mp]") {
  uint16_t port = free_port();
  const int claimed[] = {0, 1, 1};
  auto procs = run(3, [&](int i) {
    return std::map<std::string, std::string>{{"DCOMM_RANK", std::to_string(claimed[i])}, {"DCOMM_WORLD_SIZE", "3"},
                                              {"DCOMM_MASTER_PORT", std::to_string(port)}, {"DCOMM_TIMEOUT_S", "30"}};
  });
  for (auto& p : procs) {
    INFO(p.err());
    CHECK(p.exit_code == 3);
    CHECK_THAT(p.err(), Catch::Contains("rank 1 is claimed by two processes: pid"));
  }
}
