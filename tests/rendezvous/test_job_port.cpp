// The store's port under mpirun and Slurm with no MASTER_PORT: derived from the job id; two jobs whose candidate
// ports collide both find their own store.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <dcomm/error.hpp>
#include <dcomm/store.hpp>
#include <set>
#include <string>
#include <thread>

#include "rendezvous/job_port.hpp"
#include "tests/rendezvous/env_guard.hpp"

using namespace dcomm;
using namespace dcomm::rdzv;
using dcomm::test::EnvGuard;

TEST_CASE("job ports: derived from the job id, the same on every rank, distinct, in range", "[job_port]") {
  auto a = derive_job_ports("mpirun:1390739457");
  CHECK(a == derive_job_ports("mpirun:1390739457"));
  CHECK(a.size() == static_cast<std::size_t>(kJobPortCandidates));
  CHECK(std::set<uint16_t>(a.begin(), a.end()).size() == a.size());
  for (uint16_t p : a) {
    CHECK(p >= kJobPortLow);
    CHECK(p <= kJobPortHigh);
  }
  CHECK(a.front() != derive_job_ports("mpirun:1390739458").front());
}

TEST_CASE("job ports: mpirun's and Slurm's job ids; none without a launcher", "[job_port]") {
  EnvGuard env;
  CHECK_FALSE(job_ports_from_environment());
  env.set("SLURM_JOB_ID", "4242").set("SLURM_STEP_ID", "3");
  auto slurm = job_ports_from_environment();
  REQUIRE(slurm);
  CHECK(slurm->job_id == "slurm:4242.3");
  CHECK(slurm->origin.find("SLURM_JOB_ID=4242") != std::string::npos);
  // mpirun inside a Slurm allocation: mpirun's job is the one that started this process.
  env.set("OMPI_MCA_ess_base_jobid", "1390739457");
  auto mpi = job_ports_from_environment();
  REQUIRE(mpi);
  CHECK(mpi->job_id == "mpirun:1390739457");
  CHECK(mpi->ports == derive_job_ports("mpirun:1390739457"));
}

// Two jobs of two ranks each whose candidate ports are the same list, as if their ids hashed alike: each rank 0
// hosts on the first free candidate, each rank 1 must find its own job's store (and skip the other job's).
TEST_CASE("job ports: two jobs with colliding ports each find their own store", "[job_port]") {
  const auto ports = derive_job_ports("test_job_port:" + std::to_string(::getpid()));
  TcpStoreOptions opts;
  opts.timeout = std::chrono::seconds(60);
  std::unique_ptr<TcpStoreServer> server_a, server_b;
  JobPorts a{"job-a", "test", ports};
  JobPorts b{"job-b", "test", ports};
  auto host_a = open_job_store(a, "127.0.0.1", true, "127.0.0.1", opts, &server_a);
  auto host_b = open_job_store(b, "127.0.0.1", true, "127.0.0.1", opts, &server_b);
  CHECK(server_a->port() != server_b->port());
  host_a->set("who", Store::Bytes{'a'});
  host_b->set("who", Store::Bytes{'b'});
  // Job b's rank 1 tries job a's store first (same candidates) and must pass over it.
  std::shared_ptr<Store> client_a, client_b;
  std::string error;
  std::thread ta([&] {
    try {
      client_a = open_job_store(a, "127.0.0.1", false, "", opts, nullptr);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  client_b = open_job_store(b, "127.0.0.1", false, "", opts, nullptr);
  ta.join();
  REQUIRE(error.empty());
  REQUIRE(client_a);
  CHECK(client_a->get("who") == Store::Bytes{'a'});
  CHECK(client_b->get("who") == Store::Bytes{'b'});
}

TEST_CASE("job ports: no store of this job: a timeout naming the job and its ports", "[job_port]") {
  JobPorts job{"job-none", "OMPI_MCA_ess_base_jobid=7", {kJobPortHigh}};
  TcpStoreOptions opts;
  opts.timeout = std::chrono::milliseconds(300);
  try {
    open_job_store(job, "127.0.0.1", false, "", opts, nullptr);
    FAIL("expected a timeout");
  } catch (const TimeoutError& e) {
    std::string m = e.what();
    CHECK(m.find("job-none") != std::string::npos);
    CHECK(m.find(std::to_string(kJobPortHigh)) != std::string::npos);
    CHECK(m.find("MASTER_PORT") != std::string::npos);
  }
}
