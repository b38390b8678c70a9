#include "transports/cuda_ipc/ipc_memory.hpp"

#include <cuda.h>  // driver types only: the one driver call is looked up through the runtime, so no -lcuda
#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "transports/cuda_ipc/cuda_check.hpp"

namespace dcomm::transport::cuda_ipc {
namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
using GetPointerAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

// The driver calls the runtime API lacks, looked up once through the runtime so dcomm needs no -lcuda.
template <typename Fn>
Fn driver_fn(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cuda::check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found),
              fmt::format("cuda_ipc: looking up {}", name));
  if (found != cudaDriverEntryPointSuccess || p == nullptr) {
    cuda::throw_error(cudaErrorSymbolNotFound, fmt::format("cuda_ipc: the driver has no {}", name));
  }
  return reinterpret_cast<Fn>(p);
}

// The runtime API has no "allocation that contains this pointer" query; the driver's cuMemGetAddressRange does.
GetAddressRange address_range_fn() {
  static const GetAddressRange fn = driver_fn<GetAddressRange>("cuMemGetAddressRange");
  return fn;
}

GetPointerAttribute pointer_attribute_fn() {
  static const GetPointerAttribute fn = driver_fn<GetPointerAttribute>("cuPointerGetAttribute");
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
                fmt::format("cuda_ipc: cudaIpcGetMemHandle for the allocation at {:#x} holding {} (the driver "
                            "reported it exportable; check that the buffer was not freed while being sent)", r.base,
                            data));
  }
  return r;
}

static_assert(std::endian::native == std::endian::little, "ipc_exportable reads a boolean of unknown width");

bool ipc_exportable(const void* data) noexcept {
  try {
    // The driver documents the attribute as a boolean without fixing its width: a zeroed 64-bit word reads the same
    // whether it writes 1, 4 or 8 bytes of it (little-endian, like every target dcomm builds for).
    uint64_t capable = 0;
    CUresult res = pointer_attribute_fn()(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                          reinterpret_cast<CUdeviceptr>(data));
    return res != CUDA_SUCCESS || capable != 0;
  } catch (...) {
    (void)cudaGetLastError();
    return true;  // no answer: let export_range try, and report whatever is wrong
  }
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
