#pragma once
// The receiver's copies in flight: one non-blocking stream per device and an event per copy, polled from the
// transport's progress(). The stream is non-blocking so a copy never queues behind the legacy default stream.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace dcomm::transport::cuda_ipc {

/// What a copy completes: the receive's op, and the (peer, seq) its acknowledgement names. A chunk of a staged
/// message (staged_receive.hpp) has no op of its own and names the staging slot it empties.
struct FinishedCopy {
  int peer = -1;
  uint64_t seq = 0;
  std::size_t bytes = 0;
  OpPtr op;                  ///< null for a chunk
  std::exception_ptr error;  ///< set when the copy failed on the device
  bool chunk = false;
  uint64_t slot_offset = 0;  ///< a chunk's slot in the sender's staging buffer
};

class CopyEngine {
 public:
  CopyEngine() = default;
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  ~CopyEngine() { close(); }

  /// Queues dst <- src (`bytes`) on `device`'s copy stream. `what` names the copy in a failure.
  void start(int device, void* dst, const void* src, std::size_t bytes, FinishedCopy done, std::string what);
  /// Calls `finished` for every copy that completed (or failed) since the last poll; returns whether any did.
  bool poll(const std::function<void(const FinishedCopy&)>& finished);
  /// Waits for copies still running (device work only, which always ends), fails their ops (chunks have none) with
  /// AbortedError and releases streams and events. Never throws.
  void close() noexcept;

 private:
  struct InFlight {
    cudaEvent_t event;
    FinishedCopy done;
    std::string what;
  };
  cudaStream_t stream_for(int device);
  std::map<int, cudaStream_t> streams_;
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace dcomm::transport::cuda_ipc
