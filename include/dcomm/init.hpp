#pragma once
/// Joining the world: who this process is, and the process group it belongs to.

#include <memory>
#include <string>

#include <dcomm/store.hpp>
#include <dcomm/types.hpp>

namespace dcomm {

class ProcessGroup;

/// A process's place in the world. Ranks are dense: node ranks 0..node_count-1, local ranks 0..local_world_size-1.
struct Identity {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  int node_rank = -1;
  int node_count = -1;
  std::string host_id{};  ///< ranks with equal host ids share a node (DCOMM_HOST_ID overrides the default)
  std::string source{};   ///< where it came from: "explicit", "dcomm-run", "torchrun", "mpirun", "slurm", "dynamic"
};

/// How to join. Every field left unset is taken from, in order: the launcher's environment (dcomm-run's and
/// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK / NODE_RANK, MASTER_ADDR, MASTER_PORT;
/// mpirun's OMPI_COMM_WORLD_*; Slurm's SLURM_*), then dynamic assignment through the store (ranks in join order,
/// grouped by host id).
struct InitOptions {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  int node_rank = -1;
  int node_count = -1;
  std::string host_id{};
  /// The store's address; empty: MASTER_ADDR / DCOMM_MASTER_ADDR, else 127.0.0.1.
  std::string master_addr{};
  /// The store's port; -1: MASTER_PORT / DCOMM_MASTER_PORT, else under mpirun or Slurm a port derived from the
  /// job id (docs/store.md), else 29500.
  int master_port = -1;
  /// A store to use instead of connecting to (or hosting) a TCP store, e.g. make_memory_store() for threads.
  std::shared_ptr<Store> store{};
  /// Bound on rendezvous and, by default, on every operation. kDefaultTimeout: DCOMM_TIMEOUT_S, else 300 s.
  Duration timeout = kDefaultTimeout;
  /// Force one transport for every peer ("loopback", "shm", "ucx", "cuda_ipc"); empty: DCOMM_TRANSPORT, else
  /// the best per peer.
  std::string transport{};
};

/// Establishes this process's identity from options and environment. Does not join a group.
Identity resolve_identity(const InitOptions& options);

/// Joins the world and returns its process group. Collective: every rank of the world must call it.
std::shared_ptr<ProcessGroup> init(const InitOptions& options = {});

}  // namespace dcomm
