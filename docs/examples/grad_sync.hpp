#pragma once
// Averaging gradients across ranks, the way PyTorch's DistributedDataParallel does it: tensors are grouped into
// buckets of about `bucket_bytes` in the order the backward pass produces them (last layer first), and each bucket
// is all-reduced asynchronously the moment its last gradient is final, while the backward pass goes on computing
// the layers below. finish() then only waits for what is still in flight. Because the gradients live in one flat
// array and a bucket holds consecutive tensors, a bucket is a contiguous slice that is reduced in place: no copies.
//
// Without bucketing, finish() all-reduces each tensor on its own after the backward pass: the baseline that
// pays one latency per tensor and overlaps nothing.

#include <chrono>
#include <dcomm/dcomm.hpp>
#include <span>
#include <string>
#include <vector>

#include "mlp.hpp"

namespace examples {

struct Bucket {
  std::size_t first_tensor = 0;  ///< the lowest tensor index it holds
  std::size_t last_tensor = 0;   ///< the highest; the backward pass fills it from here down
  std::size_t offset = 0;        ///< in floats
  std::size_t count = 0;
};

/// Groups tensors, last first, into buckets of at most `bucket_bytes` (a tensor larger than that gets a bucket of
/// its own; 0 gives every tensor its own bucket).
std::vector<Bucket> assign_buckets(const std::vector<TensorSlice>& tensors, std::size_t bucket_bytes);

class GradSync {
 public:
  struct Options {
    bool bucketing = true;
    std::size_t bucket_bytes = 1 << 20;
    std::string algorithm;  ///< forwarded to CollectiveOptions::algorithm; empty: the group's choice
  };

  GradSync(dcomm::ProcessGroup& group, const std::vector<TensorSlice>& tensors, std::span<float> grad, Options options);

  /// Call before each backward pass.
  void begin();
  /// The backward pass's hook: tensor `t`'s gradient is final.
  void on_ready(std::size_t t);
  /// Returns once every gradient is averaged over the group; throws the collective's dcomm::Error.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Time finish() spent waiting in the last step: the communication the backward pass did not hide.
  std::chrono::duration<double> exposed_wait() const { return exposed_; }

 private:
  dcomm::Buffer slice(std::size_t offset, std::size_t count) const;

  dcomm::ProcessGroup& group_;
  const std::vector<TensorSlice>& tensors_;
  std::span<float> grad_;
  Options options_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // tensor -> bucket
  std::vector<std::size_t> pending_;    // per bucket: tensors not yet final
  std::vector<dcomm::WorkPtr> works_;   // in launch order
  std::chrono::duration<double> exposed_{0};
};

}  // namespace examples
