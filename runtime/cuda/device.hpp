#pragma once
// Where a buffer lives, asked of CUDA (cudaPointerGetAttributes), and the check that one call's buffers agree.
// Works in every build: without CUDA every pointer is host memory and a buffer that claims a CUDA device is
// rejected with a message that says so.

#include <initializer_list>
#include <string_view>

#include <dcomm/types.hpp>

namespace dcomm::runtime {

/// How CUDA sees a pointer.
enum class MemoryKind {
  kHost,            ///< ordinary pageable host memory (or any pointer CUDA does not know)
  kRegisteredHost,  ///< pinned: cudaHostAlloc / cudaHostRegister
  kDevice,          ///< cudaMalloc'ed device memory
  kManaged,         ///< cudaMallocManaged: migrates between host and device on touch
};
const char* to_string(MemoryKind kind) noexcept;

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  ///< the owning device for kDevice and kManaged, else -1
};

/// Asks CUDA about `p`; never throws (a pointer CUDA rejects is host memory).
PointerInfo describe_pointer(const void* p) noexcept;

/// The Device dcomm moves `p` as: Device::cuda(i) for device memory; host for everything the host can read
/// directly, including pinned and managed memory (managed memory is correct over every transport that way).
Device detect_device(const void* p) noexcept;

/// Whether this process sees at least one CUDA device (false in a build without CUDA).
bool cuda_available() noexcept;

/// A buffer of a call, with the name its error messages use ("send", "recv").
struct NamedBuffer {
  const char* name;
  const Buffer* buffer;
};

/// The device a call runs on. Resolves Buffer::detect_device, ignores empty buffers (null or zero count), and
/// throws InvalidUsageError naming `what`, each buffer and its device when they disagree ("all_reduce: send is on
/// cuda:0 but recv is on host ..."), or when a buffer is on CUDA and this build or process has no CUDA.
Device call_device(std::string_view what, std::initializer_list<NamedBuffer> buffers);

}  // namespace dcomm::runtime
