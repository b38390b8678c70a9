// Identity from options and each launcher's environment, and the host id default.

#include <catch2/catch.hpp>

#include <dcomm/error.hpp>
#include <dcomm/init.hpp>

#include "rendezvous/identity.hpp"
#include "tests/rendezvous/env_guard.hpp"

#include <unistd.h>

using namespace dcomm;
using dcomm::test::EnvGuard;

namespace {

void check_identity(const Identity& id, int rank, int world, int local_rank, int local_world, int node_rank,
                    int node_count, const std::string& source) {
  CHECK(id.rank == rank);
  CHECK(id.world_size == world);
  CHECK(id.local_rank == local_rank);
  CHECK(id.local_world_size == local_world);
  CHECK(id.node_rank == node_rank);
  CHECK(id.node_count == node_count);
  CHECK(id.source == source);
}

}  // namespace

TEST_CASE("identity: dcomm-run's variables", "[identity]") {
  EnvGuard env;
  env.set("DCOMM_RANK", "5").set("DCOMM_WORLD_SIZE", "7").set("DCOMM_LOCAL_RANK", "1");
  env.set("DCOMM_LOCAL_WORLD_SIZE", "3").set("DCOMM_NODE_RANK", "2").set("DCOMM_NODE_COUNT", "3");
  // torchrun's are ignored when dcomm-run's are present.
  env.set("RANK", "0").set("WORLD_SIZE", "2");
  check_identity(resolve_identity({}), 5, 7, 1, 3, 2, 3, "dcomm-run");
}

TEST_CASE("identity: torchrun's variables", "[identity]") {
  EnvGuard env;
  env.set("RANK", "3").set("WORLD_SIZE", "6").set("LOCAL_RANK", "0").set("LOCAL_WORLD_SIZE", "2");
  env.set("GROUP_RANK", "1").set("NODE_RANK", "9").set("GROUP_WORLD_SIZE", "3");
  check_identity(resolve_identity({}), 3, 6, 0, 2, 1, 3, "torchrun");
  ::unsetenv("GROUP_RANK");
  ::setenv("NODE_RANK", "2", 1);
  CHECK(resolve_identity({}).node_rank == 2);
}

TEST_CASE("identity: from_environment = false reads no launcher variable", "[identity]") {
  // A torch subgroup of 2 inside a world of 3 launched by torchrun: the launcher's local ranks are the world's.
  EnvGuard env;
  env.set("RANK", "2").set("WORLD_SIZE", "3").set("LOCAL_RANK", "2").set("LOCAL_WORLD_SIZE", "3");
  env.set("GROUP_RANK", "0").set("GROUP_WORLD_SIZE", "1");
  InitOptions o;
  o.rank = 1;
  o.world_size = 2;
  o.from_environment = false;
  check_identity(resolve_identity(o), 1, 2, -1, -1, -1, -1, "explicit");
  // The default reads the world's LOCAL_WORLD_SIZE, which contradicts the group (what torch's new_group hit).
  o.from_environment = true;
  CHECK_THROWS_WITH(resolve_identity(o),
                    Catch::Contains("local world size 3 (LOCAL_WORLD_SIZE=3) exceeds world size 2"));
}

TEST_CASE("identity: mpirun's variables", "[identity]") {
  EnvGuard env;
  env.set("OMPI_COMM_WORLD_RANK", "2").set("OMPI_COMM_WORLD_SIZE", "5").set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "1").set("OMPI_COMM_WORLD_NODE_RANK", "0");
  // OMPI_COMM_WORLD_NODE_RANK is a rank among a node's processes, not a node index: node fields stay open.
  check_identity(resolve_identity({}), 2, 5, 0, 1, -1, -1, "mpirun");
}

TEST_CASE("identity: Slurm's variables", "[identity]") {
  EnvGuard env;
  env.set("SLURM_PROCID", "9").set("SLURM_NTASKS", "12").set("SLURM_LOCALID", "1").set("SLURM_NODEID", "4");
  env.set("SLURM_NNODES", "6");
  check_identity(resolve_identity({}), 9, 12, 1, -1, 4, 6, "slurm");
}

TEST_CASE("identity: explicit options win over the environment", "[identity]") {
  EnvGuard env;
  env.set("RANK", "3").set("WORLD_SIZE", "6").set("LOCAL_RANK", "1");
  InitOptions o;
  o.rank = 1;
  o.world_size = 2;
  o.host_id = "my-host";
  Identity id = resolve_identity(o);
  check_identity(id, 1, 2, 1, -1, -1, -1, "explicit");
  CHECK(id.host_id == "my-host");
}

TEST_CASE("identity: nothing given is dynamic; a world size alone sizes it", "[identity]") {
  EnvGuard env;
  check_identity(resolve_identity({}), -1, -1, -1, -1, -1, -1, "dynamic");
  env.set("WORLD_SIZE", "4");
  check_identity(resolve_identity({}), -1, 4, -1, -1, -1, -1, "dynamic");
}

TEST_CASE("identity: bad values are rejected naming their origin", "[identity]") {
  EnvGuard env;
  env.set("RANK", "two").set("WORLD_SIZE", "4");
  CHECK_THROWS_WITH(resolve_identity({}), Catch::Contains("RANK='two'") && Catch::Contains("not an integer"));
  env.set("RANK", "4");
  CHECK_THROWS_WITH(resolve_identity({}), Catch::Contains("rank 4 (RANK=4)") && Catch::Contains("WORLD_SIZE=4"));
  env.set("RANK", "1").set("LOCAL_RANK", "2").set("LOCAL_WORLD_SIZE", "2");
  CHECK_THROWS_AS(resolve_identity({}), InvalidUsageError);
  env.set("LOCAL_RANK", "0").set("LOCAL_WORLD_SIZE", "5");
  CHECK_THROWS_WITH(resolve_identity({}), Catch::Contains("local world size 5 (LOCAL_WORLD_SIZE=5) exceeds world size 4"));
  InitOptions o;
  o.rank = -7;
  CHECK_THROWS_WITH(resolve_identity(o), Catch::Contains("InitOptions::rank is -7"));
  InitOptions zero;
  zero.world_size = 0;
  CHECK_THROWS_WITH(resolve_identity(zero), Catch::Contains("world size 0 (InitOptions::world_size)"));
}

TEST_CASE("identity: the host id defaults to hostname and network namespace", "[identity]") {
  EnvGuard env;
  char host[256] = {0};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  char link[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof link - 1);
  std::string id = rdzv::default_host_id();
  if (n > 0) {
    std::string ns(link, static_cast<std::size_t>(n));  // "net:[4026531840]"
    std::string inode = ns.substr(ns.find('[') + 1, ns.find(']') - ns.find('[') - 1);
    CHECK(id == std::string(host) + ":" + inode);
  } else {
    CHECK(id == host);
  }
  CHECK(resolve_identity({}).host_id == id);
  env.set("DCOMM_HOST_ID", "rack3-node7");
  CHECK(rdzv::default_host_id() == "rack3-node7");
  CHECK(resolve_identity({}).host_id == "rack3-node7");
}
