#pragma once
// Bringing up MPI on the ranks of a dcomm process group, so that the MPI peer runs on the same processes.
//
// Under mpirun (OMPI_COMM_WORLD_* set), MPI_Init is all it takes: MPI_COMM_WORLD already holds these ranks.
// Under dcomm-run there is no MPI job, so each process starts as an MPI singleton; OpenMPI 4.1 lets singletons
// connect only through an ompi-server, so rank 0 starts one, and the ranks join one by one:
//   1. rank 0 spawns `ompi-server --no-daemonize --report-uri FILE` and posts its URI in dcomm's store;
//   2. every rank sets OMPI_MCA_pmix_server_uri to it, then MPI_Init (a singleton);
//   3. rank 0 opens a port and posts its name; for k = 1..P-1 ranks 0..k-1 MPI_Comm_accept and rank k
//      MPI_Comm_connect, and MPI_Intercomm_merge puts rank k last: the result has dcomm's rank order.

#include <mpi.h>
#include <sys/types.h>

#include <dcomm/process_group.hpp>

#include <vector>

namespace dcomm::bench {

class MpiSession {
 public:
  /// Joins MPI; throws BenchFailure (exit 1) with what to do when it cannot.
  MpiSession(const ProcessGroupPtr& pg, Duration timeout);
  /// Disconnects, finalizes MPI and stops the ompi-server it started. Never throws.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  MPI_Comm comm() const { return comm_; }

 private:
  void join_world();
  void join_singletons(const ProcessGroupPtr& pg, Duration timeout);
  void start_server(Store& store, Duration timeout);
  void teardown() noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MPI_Comm> links_;  // intercommunicators and intermediate merges, disconnected on teardown
  pid_t server_pid_ = -1;        // the ompi-server rank 0 started
  bool initialized_ = false;
};

}  // namespace dcomm::bench
