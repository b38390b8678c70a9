#pragma once
/// The handle of an operation in flight, in the shape of c10d's Work.

#include <cstddef>
#include <exception>
#include <memory>

#include <dcomm/types.hpp>

namespace dcomm {

class Work {
 public:
  virtual ~Work() = default;
  /// Whether the operation has finished, successfully or not. Never blocks; drives progress.
  virtual bool is_completed() = 0;
  /// Waits for the operation. Returns true once it completed; rethrows its failure if it failed; throws
  /// TimeoutError if it is still running after `timeout` (kDefaultTimeout: the group's timeout).
  virtual bool wait(Duration timeout = kDefaultTimeout) = 0;
  /// The failure, once completed with one; null otherwise.
  virtual std::exception_ptr exception() = 0;
  /// Cancels the operation if it has not completed: a posted receive is withdrawn, a collective fails with
  /// AbortedError. Never throws.
  virtual void abort() noexcept = 0;
  /// Makes later work queued on `stream` (a cudaStream_t) wait for this operation without blocking the host.
  /// Host-only operations wait on the host instead.
  virtual void wait_stream(void* stream) {
    (void)stream;
    wait();
  }
  /// For receives: the rank that sent the message (useful with kAnySource) and its size in bytes.
  virtual int source() const { return -1; }
  virtual std::size_t bytes() const { return 0; }
};

using WorkPtr = std::shared_ptr<Work>;

/// Waits for every handle, rethrowing the first failure. Batched point-to-point: post many, wait for all.
void wait_all(const std::vector<WorkPtr>& works, Duration timeout = kDefaultTimeout);

}  // namespace dcomm
