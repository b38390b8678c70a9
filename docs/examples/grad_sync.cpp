#include "grad_sync.hpp"

#include <stdexcept>

namespace examples {

std::vector<Bucket> assign_buckets(const std::vector<TensorSlice>& tensors, std::size_t bucket_bytes) {
  std::vector<Bucket> buckets;
  for (std::size_t t = tensors.size(); t-- > 0;) {
    const std::size_t bytes = tensors[t].count * sizeof(float);
    const bool fits = !buckets.empty() && (buckets.back().count * sizeof(float) + bytes <= bucket_bytes);
    if (!fits) buckets.push_back({t, t, tensors[t].offset, 0});
    Bucket& b = buckets.back();
    // Tensors are laid out in forward order, so adding the next lower tensor extends the slice downwards.
    b.first_tensor = t;
    b.offset = tensors[t].offset;
    b.count += tensors[t].count;
  }
  return buckets;
}

GradSync::GradSync(dcomm::ProcessGroup& group, const std::vector<TensorSlice>& tensors, std::span<float> grad,
                   Options options)
    : group_(group), tensors_(tensors), grad_(grad), options_(std::move(options)) {
  buckets_ = options_.bucketing ? assign_buckets(tensors_, options_.bucket_bytes) : assign_buckets(tensors_, 0);
  bucket_of_.resize(tensors_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    for (std::size_t t = buckets_[b].first_tensor; t <= buckets_[b].last_tensor; ++t) bucket_of_[t] = b;
}

dcomm::Buffer GradSync::slice(std::size_t offset, std::size_t count) const {
  return dcomm::Buffer(grad_.data() + offset, count);
}

void GradSync::begin() {
  pending_.clear();
  for (const Bucket& b : buckets_) pending_.push_back(b.last_tensor - b.first_tensor + 1);
  works_.clear();
}

void GradSync::on_ready(std::size_t t) {
  if (!options_.bucketing) return;  // everything waits for finish()
  const std::size_t b = bucket_of_.at(t);
  if (pending_.at(b) == 0) throw std::logic_error("GradSync: tensor " + std::to_string(t) + " reported twice");
  if (--pending_[b] > 0) return;
  // The bucket is complete: start averaging it now and let the backward pass continue meanwhile.
  dcomm::CollectiveOptions opts;
  opts.async_op = true;
  opts.algorithm = options_.algorithm;
  works_.push_back(
      group_.all_reduce(slice(buckets_[b].offset, buckets_[b].count), dcomm::Reduction{dcomm::ReduceOp::kAvg}, opts));
}

void GradSync::finish() {
  const auto start = std::chrono::steady_clock::now();
  if (options_.bucketing) {
    if (works_.size() != buckets_.size()) {
      throw std::logic_error("GradSync: the backward pass reported " + std::to_string(works_.size()) + " of " +
                             std::to_string(buckets_.size()) + " buckets complete");
    }
    for (const dcomm::WorkPtr& w : works_) w->wait();  // in launch order: the first failure is the cause
  } else {
    dcomm::CollectiveOptions opts;
    opts.algorithm = options_.algorithm;
    for (const TensorSlice& t : tensors_) {
      group_.all_reduce(slice(t.offset, t.count), dcomm::Reduction{dcomm::ReduceOp::kAvg}, opts);
    }
  }
  exposed_ = std::chrono::steady_clock::now() - start;
}

}  // namespace examples
