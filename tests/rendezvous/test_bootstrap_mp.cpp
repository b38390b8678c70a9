// bootstrap() in real processes: each helper (rdzv_member) is its own process with its own environment, as
// under a launcher. Started with posix_spawn.

#include <catch2/catch.hpp>

#include <dcomm/store.hpp>

#include "tests/rendezvous/env_guard.hpp"
#include "tests/rendezvous/spawn.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
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

std::vector<std::string> identity_vars() {
  return std::vector<std::string>(std::begin(dcomm::test::kIdentityVars), std::end(dcomm::test::kIdentityVars));
}

// Whether something listens on 127.0.0.1:port (a connect that is closed at once: the server drops it quietly).
bool listening(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
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

TEST_CASE("bootstrap mp: two mpirun jobs on one host and port: the other job's ranks are refused", "[bootstrap][mp]") {
  // Issue 13, part 6: under mpirun the store port defaults to 29500, so two jobs on one host met in one store and
  // one rank of a 3-rank job joined a 2-rank job's store. Job A (2 ranks) hosts the store; job B (3 ranks) comes
  // to the same port: B's rank 0 cannot host, B's other ranks are refused at hello naming both jobs, A completes.
  uint16_t port = free_port();
  char tmpl[] = "/tmp/dcomm-rdzv-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  auto env = [&](int rank, int world, const char* ns) {
    return std::map<std::string, std::string>{{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                                              {"OMPI_COMM_WORLD_SIZE", std::to_string(world)},
                                              {"PMIX_NAMESPACE", ns},
                                              {"MASTER_PORT", std::to_string(port)},
                                              {"DCOMM_TIMEOUT_S", "20"}};
  };
  std::vector<Spawned> a, b;
  a.push_back(dcomm::test::spawn(helper(), env(0, 2, "1001"), identity_vars(), dir, "a0"));
  for (int i = 0; i < 500 && !listening(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int r = 0; r < 3; ++r) {
    b.push_back(dcomm::test::spawn(helper(), env(r, 3, "2002"), identity_vars(), dir, fmt::format("b{}", r)));
  }
  CHECK(dcomm::test::reap_all(b, std::chrono::seconds(60)));
  a.push_back(dcomm::test::spawn(helper(), env(1, 2, "1001"), identity_vars(), dir, "a1"));
  CHECK(dcomm::test::reap_all(a, std::chrono::seconds(60)));
  for (auto& p : a) {
    p.capture();
    INFO(p.err());
    CHECK(p.exit_code == 0);
  }
  for (auto& p : b) p.capture();
  INFO(b[0].err());
  CHECK(b[0].exit_code == 3);
  CHECK_THAT(b[0].err(), Catch::Contains(fmt::format("{}", port)));
  for (int r = 1; r < 3; ++r) {
    INFO(b[r].err());
    CHECK(b[r].exit_code == 3);
    CHECK_THAT(b[r].err(), Catch::Contains("this store serves job PMIX_NAMESPACE=1001 (world size 2)") &&
                               Catch::Contains("the client belongs to job PMIX_NAMESPACE=2002 (world size 3)"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("bootstrap mp: rank 0 listening beyond loopback needs a secret, and says how to give one", "[bootstrap][mp]") {
  // Issue 13, part 3: rank 0 listened on 0.0.0.0 as soon as MASTER_ADDR was set, without a secret.
  uint16_t port = free_port();
  auto procs = run(1, [&](int) {
    return std::map<std::string, std::string>{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "192.0.2.1"},
                                              {"MASTER_PORT", std::to_string(port)}, {"DCOMM_TIMEOUT_S", "5"}};
  });
  INFO(procs[0].err());
  CHECK(procs[0].exit_code == 3);
  CHECK_THAT(procs[0].err(), Catch::Contains("rank 0 hosts the store") && Catch::Contains("192.0.2.1") &&
                                 Catch::Contains("DCOMM_STORE_SECRET=") && Catch::Contains("DCOMM_STORE_SECRET_FILE=") &&
                                 Catch::Contains("DCOMM_STORE_INSECURE=1"));
}
