#pragma once
// The device side of staging: pinned host chunks ("slots") and the asynchronous copies between them and device
// memory. StagedTransport (staged_transport.hpp) moves device buffers over host-only transports through them.
// The CUDA implementation lives in transports/cuda_ipc/cuda_stager.cpp; the tests bring a host-memory stand-in that
// makes the chunk protocol testable on machines without a GPU.

#include <cstddef>
#include <memory>

#include <dcomm/types.hpp>

namespace dcomm::transport::staging {

/// One pinned host chunk of Stager::chunk_bytes() and the copy that last used it. At most one copy is in flight per
/// slot; its memory belongs to that copy until idle() says it finished.
class Slot {
 public:
  virtual ~Slot() = default;  ///< waits for the slot's copy (copies always end), then returns the chunk
  virtual void* host() = 0;
  /// Queues a copy of `bytes` from device memory at `src` into host().
  virtual void to_host(const void* src, std::size_t bytes) = 0;
  /// Queues a copy of `bytes` from host() to device memory at `dst`.
  virtual void to_device(void* dst, std::size_t bytes) = 0;
  /// Whether the last queued copy has finished (true when none was queued). Throws when the copy failed.
  virtual bool idle() = 0;
};

class Stager {
 public:
  virtual ~Stager() = default;
  /// Whether this stager copies memory on `device`.
  virtual bool handles(const Device& device) const = 0;
  /// Bytes per slot: a staged message moves in chunks of this size.
  virtual std::size_t chunk_bytes() const = 0;
  /// Slots a message keeps in flight, so the copy of one chunk overlaps the transfer of the previous ones.
  virtual int depth() const = 0;
  /// A slot for copies to and from `device`; slots are pooled, so this is cheap after the first use.
  virtual std::unique_ptr<Slot> slot(const Device& device) = 0;
};

/// The stager of this build: CUDA's when dcomm was built with CUDA (it touches CUDA only at the first slot), else
/// null, and device buffers then need a transport that moves them natively.
std::shared_ptr<Stager> default_stager();

}  // namespace dcomm::transport::staging
