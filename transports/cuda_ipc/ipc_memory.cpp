#include "transports/cuda_ipc/ipc_memory.hpp"

#include <cuda.h>  // driver types only: the one driver call is looked up through the runtime, so no -lcuda
#include <fmt/format.h>

#include <cstring>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);

// The runtime API has no "allocation that contains this pointer" query; the driver's cuMemGetAddressRange does.
GetAddressRange address_range_fn() {
  static const GetAddressRange fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cuda::check(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &found),
                "cuda_ipc: looking up cuMemGetAddressRange");
    if (found != cudaDriverEntryPointSuccess || p == nullptr) {
      cuda::throw_error(cudaErrorSymbolNotFound, "cuda_ipc: the driver has no cuMemGetAddressRange");
    }
    return reinterpret_cast<GetAddressRange>(p);
  }();
  return fn;
}

}  // namespace

ExportedRange export_range(const void* data, bool with_handle) {
  ExportedRange r;
  CUdeviceptr base = 0;
  std::size_t size = 0;
  CUresult res = address_range_fn()(&base, &size, reinterpret_cast<CUdeviceptr>(data));
  if (res != CUDA_SUCCESS) {
    cuda::throw_error(cudaErrorInvalidValue,
                      fmt::format("cuda_ipc: pointer {} is not inside a device allocation (driver error {}); pass "
                                  "memory from cudaMalloc", data, static_cast<int>(res)));
  }
  r.base = static_cast<uint64_t>(base);
  r.offset = reinterpret_cast<uint64_t>(data) - r.base;
  if (with_handle) {
    cuda::check(cudaIpcGetMemHandle(&r.handle, reinterpret_cast<void*>(base)),
                fmt::format("cuda_ipc: cudaIpcGetMemHandle for the allocation at {:#x} holding {} (memory from "
                            "cudaMallocAsync pools or cudaMallocManaged cannot be shared; send from memory that "
                            "cudaMalloc returned)", r.base, data));
  }
  return r;
}

void* ImportCache::open(int peer, uint64_t base, const cudaIpcMemHandle_t& handle) {
  auto key = std::make_pair(peer, base);
  auto it = mapped_.find(key);
  if (it != mapped_.end()) {
    if (std::memcmp(&it->second.handle, &handle, sizeof(handle)) == 0) return it->second.local;
    (void)cudaIpcCloseMemHandle(it->second.local);  // the peer's old allocation at this address is gone
    mapped_.erase(it);
  }
  void* local = nullptr;
  cuda::check(cudaIpcOpenMemHandle(&local, handle, cudaIpcMemLazyEnablePeerAccess),
              fmt::format("cuda_ipc: cudaIpcOpenMemHandle of rank {}'s allocation at {:#x} (the GPUs may not reach "
                          "each other - check `nvidia-smi topo -m`; or rank {} freed the buffer while sending)",
                          peer, base, peer));
  mapped_.emplace(key, Mapping{handle, local});
  return local;
}

void ImportCache::close_all() noexcept {
  for (auto& [key, m] : mapped_) (void)cudaIpcCloseMemHandle(m.local);
  mapped_.clear();
  (void)cudaGetLastError();
}

}  // namespace dcomm::transport::cuda_ipc
