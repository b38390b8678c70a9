#include "runtime/cuda/device.hpp"

#include <dcomm/error.hpp>
#include <fmt/format.h>

#include "dcomm_config.h"

#if DCOMM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "transports/cuda_ipc/cuda_check.hpp"
#endif

namespace dcomm::runtime {

const char* to_string(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kRegisteredHost: return "pinned host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
  }
  return "unknown";
}

PointerInfo describe_pointer(const void* p) noexcept {
#if DCOMM_HAVE_CUDA
  if (p == nullptr || !cuda_available()) return {};
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older drivers reject pageable pointers; that answer means host
    return {};
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: return {MemoryKind::kDevice, attr.device};
    case cudaMemoryTypeManaged: return {MemoryKind::kManaged, attr.device};
    case cudaMemoryTypeHost: return {MemoryKind::kRegisteredHost, -1};
    case cudaMemoryTypeUnregistered: return {};
  }
  return {};
#else
  (void)p;
  return {};
#endif
}

Device detect_device(const void* p) noexcept {
  PointerInfo info = describe_pointer(p);
  return info.kind == MemoryKind::kDevice ? Device::cuda(info.device) : Device::host();
}

bool cuda_available() noexcept {
#if DCOMM_HAVE_CUDA
  static const bool available = cuda::device_count() > 0;
  return available;
#else
  return false;
#endif
}

Device call_device(std::string_view what, std::initializer_list<NamedBuffer> buffers) {
  const NamedBuffer* first = nullptr;
  Device device = Device::host();
  for (const NamedBuffer& nb : buffers) {
    const Buffer& b = *nb.buffer;
    if (b.data == nullptr || b.count == 0) continue;
    Device d = b.detect_device ? detect_device(b.data) : b.device;
    if (!d.is_host() && !cuda_available()) {
      throw InvalidUsageError(fmt::format(
          "{}: {} buffer is on {} but {}; pass host buffers, or run where a GPU is visible (check "
          "CUDA_VISIBLE_DEVICES)", what, nb.name, to_string(d),
          DCOMM_HAVE_CUDA ? "this process sees no CUDA device" : "dcomm was built without CUDA"));
    }
    if (first == nullptr) {
      first = &nb;
      device = d;
    } else if (d != device) {
      throw InvalidUsageError(fmt::format(
          "{}: {} buffer is on {} but {} buffer is on {}; every buffer of one call must be on the same device - "
          "copy one of them (cudaMemcpy) before the call", what, first->name, to_string(device), nb.name,
          to_string(d)));
    }
  }
  return device;
}

}  // namespace dcomm::runtime
