// The transport table. A row is compiled only when its folder announced its factory (transport_config.h is
// generated from the flags the folders set in transports/meson.build), so a folder that is not built, or not
// written yet, leaves no dangling reference behind.
#include "transports/registry.hpp"

#include "dcomm_config.h"
#include "transports/transport_config.h"

namespace dcomm::transport {

const std::vector<TransportEntry>& transport_table() {
  static const std::vector<TransportEntry> table = {
#if DCOMM_HAVE_CUDA && DCOMM_TRANSPORT_CUDA_IPC
      {"cuda_ipc", 30, &make_cuda_ipc_transport, "CUDA IPC between GPUs of one node (device memory)"},
#endif
#if DCOMM_TRANSPORT_SHM
      {"shm", 20, &make_shm_transport, "shared-memory rings and CMA between processes of one node"},
#endif
#if DCOMM_HAVE_UCX && DCOMM_TRANSPORT_UCX
      {"ucx", 10, &make_ucx_transport, "UCX tag matching between nodes (TCP, RDMA)"},
#endif
#if DCOMM_TRANSPORT_LOOPBACK
      {"loopback", 0, &make_loopback_transport, "in-process copies between ranks that are threads of one process"},
#endif
  };
  return table;
}

const TransportEntry* find_transport(const std::string& name) {
  for (const auto& e : transport_table()) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace dcomm::transport
