#pragma once
// Device memory across processes with legacy CUDA IPC: the sender exports the allocation that holds its buffer
// (cudaIpcGetMemHandle works on whole allocations, so the buffer travels as base + offset); the receiver opens each
// allocation once and keeps it mapped until the transport closes.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <utility>

namespace dcomm::transport::cuda_ipc {

/// The allocation that holds a device pointer.
struct ExportedRange {
  uint64_t base = 0;
  uint64_t offset = 0;
  cudaIpcMemHandle_t handle{};
};

/// Finds `data`'s allocation (on the current device) and, when `with_handle`, its IPC handle. Throws CudaError
/// naming the pointer when the memory cannot be exported (check ipc_exportable first).
ExportedRange export_range(const void* data, bool with_handle);

/// Whether legacy IPC can export the allocation holding `data` (the driver's IS_LEGACY_CUDA_IPC_CAPABLE): false for
/// cudaMallocAsync pools, cuMemCreate mappings (PyTorch's expandable segments) and managed memory, which the
/// transport then stages (staged_send.hpp). True when the driver cannot tell, so export_range reports the problem.
/// Never throws.
bool ipc_exportable(const void* data) noexcept;

/// The receiver's mappings of its peers' allocations, keyed by (peer, base). A handle that differs from the cached
/// one for the same base means the peer freed that allocation and got a new one at the same address: the old
/// mapping is closed and the new one opened.
class ImportCache {
 public:
  ImportCache() = default;
  ImportCache(const ImportCache&) = delete;
  ImportCache& operator=(const ImportCache&) = delete;
  ~ImportCache() { close_all(); }

  /// This process's address of the peer's allocation (on the current device, which must reach the peer's).
  void* open(int peer, uint64_t base, const cudaIpcMemHandle_t& handle);
  /// cudaIpcCloseMemHandle on everything. Never throws.
  void close_all() noexcept;
  std::size_t size() const { return mapped_.size(); }

 private:
  struct Mapping {
    cudaIpcMemHandle_t handle;
    void* local;
  };
  std::map<std::pair<int, uint64_t>, Mapping> mapped_;
};

}  // namespace dcomm::transport::cuda_ipc
