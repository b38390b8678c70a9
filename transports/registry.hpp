#pragma once
// The table of transports this build has. A transport is a folder under transports/ that provides one factory
// function and one row here (see docs/adding-a-transport.md). Mesh asks each, in priority order, whether it
// can connect to a peer, and uses the first that can.

#include <memory>
#include <string>
#include <vector>

#include "rendezvous/failure_record.hpp"
#include "transports/transport.hpp"

namespace dcomm::transport {

/// What a transport is told when it is created.
struct TransportContext {
  PeerInfo self;
  int world_size = 0;
  Duration timeout = std::chrono::seconds(300);
  std::string world_id;  ///< unique per world (and restart round): names shared-memory segments, loopback worlds
  rdzv::FailureWatch failures;  ///< where setup waits look for a rank that failed (MeshOptions::failure_store)
};

struct TransportEntry {
  const char* name;
  int priority;  ///< higher wins when several can connect: cuda_ipc 30, shm 20, ucx 10, loopback 0
  std::unique_ptr<Transport> (*create)(const TransportContext& ctx);
  const char* description;
};

/// Every transport built into this library, highest priority first.
const std::vector<TransportEntry>& transport_table();
const TransportEntry* find_transport(const std::string& name);

// The factories, one per transport folder.
std::unique_ptr<Transport> make_loopback_transport(const TransportContext& ctx);
std::unique_ptr<Transport> make_shm_transport(const TransportContext& ctx);
std::unique_ptr<Transport> make_ucx_transport(const TransportContext& ctx);       // with DCOMM_HAVE_UCX
std::unique_ptr<Transport> make_cuda_ipc_transport(const TransportContext& ctx);  // with DCOMM_HAVE_CUDA

}  // namespace dcomm::transport
