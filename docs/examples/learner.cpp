#include "learner.hpp"

#include <chrono>
#include <thread>

#include "dataset.hpp"
#include "mlp.hpp"

namespace examples {

namespace {

// The learner's side of the model stream: one receive is always posted for the next model message, so the PS's
// sends always find it (or wait briefly in the unexpected list).
class ModelInbox {
 public:
  ModelInbox(dcomm::ProcessGroup& group, std::size_t params, const Tags& tags, dcomm::Duration timeout)
      : group_(group),
        tag_(tags.model_tag()),
        timeout_(timeout),
        current_(kModelHeader + params),
        incoming_(current_.size()) {
    post();
  }
  bool arrived() { return next_->is_completed(); }
  /// Waits for the next model and makes it current; returns its version (kStopVersion: stop, nothing re-posted).
  int64_t take() {
    next_->wait(timeout_);
    current_.swap(incoming_);
    const int64_t v = version_of(current_);
    if (v != kStopVersion) post();
    return v;
  }
  const float* params() const { return current_.data() + kModelHeader; }

 private:
  void post() { next_ = group_.irecv(dcomm::Buffer(incoming_), 0, tag_); }

  dcomm::ProcessGroup& group_;
  int tag_;
  dcomm::Duration timeout_;
  std::vector<float> current_, incoming_;
  dcomm::WorkPtr next_;
};

// Sleeps `ms`, waking early when a new model arrives (the PS moved on: the gradient would be wasted); returns
// whether it was interrupted. Polling also drives this rank's communication progress.
bool straggle(double ms, ModelInbox& inbox) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (inbox.arrived()) return true;
    std::this_thread::sleep_for(
        std::min(std::chrono::duration<double, std::milli>(0.25),
                 std::chrono::duration<double, std::milli>(end - std::chrono::steady_clock::now())));
  }
  return inbox.arrived();
}

}  // namespace

void run_learner(dcomm::ProcessGroup& group, Variant variant, const VariantsConfig& config, const Tags& tags) {
  const int rank = group.rank();
  const VariantRule rule = rule_of(variant, group.size() - 1, config.k);
  const Dataset data = make_teacher_dataset(config.samples, config.dim, config.classes, config.seed);
  Mlp model(config.widths(), config.seed);
  const std::size_t n = model.param_count();
  Rng batches(config.seed * 1000003u + static_cast<uint64_t>(rank));
  Rng delays(config.seed * 7919u + static_cast<uint64_t>(rank) * 104729u + static_cast<uint64_t>(tags.variant_index));
  SendQueue sends(group);
  ModelInbox inbox(group, n, tags, config.timeout);
  std::vector<int64_t> sent_versions;
  int64_t interrupted = 0;

  int64_t version = inbox.take();
  std::vector<float> grad(n + 1);
  while (version != kStopVersion) {
    std::copy_n(inbox.params(), n, model.params().begin());
    const std::vector<uint32_t> batch = draw_indices(batches, data.size(), static_cast<std::size_t>(config.batch));
    grad[n] = static_cast<float>(model.forward_backward(data, batch, std::span<float>(grad.data(), n)));
    double delay =
        config.compute_ms + (config.straggler_mean_ms > 0 ? delays.exponential(config.straggler_mean_ms) : 0);
    if (rank == config.slow_learner) delay += config.slow_ms;
    const bool cut_short = straggle(delay, inbox);
    if (cut_short) {
      ++interrupted;  // a newer model (or stop) arrived: this gradient is already stale, drop it
    } else {
      sends.post(grad, 0, tags.grad_tag(version));
      sent_versions.push_back(version);
    }
    // Batch variants keep computing on the model they have until a new one is there; the others wait for it.
    if (cut_short || !rule.batch || inbox.arrived()) version = inbox.take();
  }

  // Tell the PS what was sent so that it can receive every gradient it has not taken yet, then let the sends finish
  // (they may need those receives, so the bye goes first).
  sends.post(std::vector<int64_t>{static_cast<int64_t>(sent_versions.size()), interrupted}, 0, tags.bye_tag());
  sends.post(sent_versions, 0, tags.list_tag());
  sends.wait_all(config.timeout);
}

}  // namespace examples
