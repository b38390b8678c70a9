#pragma once
// What the parameter server (rank 0) and the learners (ranks 1..P) of sgd_variants agree on: the variants, the
// tags, the message layouts, and two helpers for non-blocking point-to-point traffic.
//
// Messages (all float arrays, n = the model's parameter count):
//   model    PS -> learner, tag model_tag():           [version : int64 in 2 floats][n parameters]; version -1 = stop
//   gradient learner -> PS, tag grad_tag(version):     [n gradient values][the mini-batch's loss]
//   bye      learner -> PS, tags bye_tag(), list_tag(): how many gradients the learner sent, then their versions
// The gradient's tag carries the version of the model it was computed on, so the PS can post any-source receives
// for exactly the version it wants: a stale gradient never matches a receive meant for a fresh one. The bye lists
// let the PS receive every gradient it did not use before the run ends, so no message is left behind.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <dcomm/dcomm.hpp>
#include <string>
#include <vector>

#include "mlp.hpp"

namespace examples {

enum class Variant { kFullySync, kKSync, kKBatchSync, kAsync, kKAsync, kKBatchAsync };
inline constexpr Variant kAllVariants[] = {Variant::kFullySync, Variant::kKSync,  Variant::kKBatchSync,
                                           Variant::kAsync,     Variant::kKAsync, Variant::kKBatchAsync};
const char* to_string(Variant v);
bool parse_variant(const std::string& name, Variant* out);

/// How a variant behaves, with P learners and the K of the run.
struct VariantRule {
  bool synchronous;          ///< every update uses gradients of the current model only
  bool batch;                ///< learners keep computing mini-batches without waiting for a new model
  int gradients_per_update;  ///< P for fully-sync, 1 for async, else K
};
VariantRule rule_of(Variant v, int learners, int k);

/// The run's knobs, the same on every rank.
struct VariantsConfig {
  int k = 2;
  int epochs = 3;
  std::size_t samples = 1024;
  int batch = 32;
  int dim = 16;
  std::vector<int> hidden = {32};
  int classes = 4;
  float lr = 0.2f;
  uint64_t seed = 1;
  double compute_ms = 1;          ///< fixed time every mini-batch takes, on top of the real computation
  double straggler_mean_ms = 20;  ///< plus an exponential delay with this mean (0: none)
  int slow_learner = -1;          ///< this learner (1..P) is slower by slow_ms per mini-batch (-1: none)
  double slow_ms = 0;
  dcomm::Duration timeout = std::chrono::seconds(60);

  std::vector<int> widths() const { return layer_widths(dim, hidden, classes); }
  int batches_per_epoch() const { return std::max(1, static_cast<int>(samples / static_cast<std::size_t>(batch))); }
};

/// Per-variant tag space, so nothing of one variant can ever match a receive of the next.
struct Tags {
  int variant_index;
  static constexpr int kVersionSpan = 1 << 24;
  int model_tag() const { return 8 * variant_index + 1; }
  int bye_tag() const { return 8 * variant_index + 2; }
  int list_tag() const { return 8 * variant_index + 3; }
  int grad_tag(int64_t version) const {
    return (1 << 26) + variant_index * kVersionSpan + static_cast<int>(version % kVersionSpan);
  }
};

inline constexpr int64_t kStopVersion = -1;
inline constexpr std::size_t kModelHeader = 2;  // floats holding the int64 version

inline void set_version(std::vector<float>& msg, int64_t v) { std::memcpy(msg.data(), &v, sizeof(v)); }
inline int64_t version_of(const std::vector<float>& msg) {
  int64_t v;
  std::memcpy(&v, msg.data(), sizeof(v));
  return v;
}

/// Sends whose buffers must outlive them: each message is copied in, and its buffer freed once the send completed.
class SendQueue {
 public:
  explicit SendQueue(dcomm::ProcessGroup& group) : group_(group) {}
  template <typename T>
  void post(std::vector<T> data, int dst, int tag) {
    auto owned = std::make_shared<std::vector<T>>(std::move(data));
    dcomm::WorkPtr w = group_.isend(dcomm::Buffer(*owned), dst, tag);
    pending_.push_back({w, owned});
    prune();
  }
  /// Drops the sends that have completed (and drives progress for the others).
  void prune();
  /// Waits for every send; throws the first failure.
  void wait_all(dcomm::Duration timeout);

 private:
  struct Pending {
    dcomm::WorkPtr work;
    std::shared_ptr<void> buffer;
  };
  dcomm::ProcessGroup& group_;
  std::vector<Pending> pending_;
};

void poll_pause(unsigned* polls);
[[noreturn]] void throw_poll_timeout(const std::string& what, dcomm::Duration timeout);

/// Polls `done` with growing sleeps (a few microseconds up to 256 us) until it returns true; throws
/// dcomm::TimeoutError naming `what` once `timeout` has passed.
template <typename Done>
void poll_until(Done done, dcomm::Duration timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  unsigned polls = 0;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) throw_poll_timeout(what, timeout);
    poll_pause(&polls);
  }
}

}  // namespace examples
