#pragma once
// The state of one data-parallel replica and the operations on it: a training step, the cross-rank check that
// every replica holds the same weights, and saving / resuming snapshots.

#include <cstdint>
#include <dcomm/dcomm.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "grad_sync.hpp"
#include "mlp.hpp"
#include "optimizer.hpp"
#include "rng.hpp"
#include "train_options.hpp"

namespace examples {

class Trainer {
 public:
  Trainer(dcomm::ProcessGroup& group, const TrainOptions& options);

  /// Restores the newest snapshot of --ckpt-dir on every rank: rank 0 reads the file and broadcasts its bytes, so
  /// only rank 0 needs the directory (the other nodes may not share its file system). Returns the snapshot's path,
  /// or "" when there was none and training starts from step 0.
  std::string resume();

  /// One optimizer step on this rank's slice of the global batch; returns the loss averaged over all ranks.
  /// `bucketing` picks between the overlapped bucketed all-reduce and one all-reduce per tensor.
  double step(bool bucketing);

  /// Throws std::runtime_error on every rank unless all ranks hold bit-identical weights, optimizer state and
  /// sampler state: the invariant that data parallelism rests on, checked with one 16-byte all_reduce.
  void check_replicas_identical();

  /// Rank 0 writes an atomic snapshot of the state after step(); other ranks do nothing. Returns the path on rank 0.
  std::string save_snapshot();

  /// Flips the lowest bit of one weight: a replica gone wrong, for showing that the check catches it.
  void corrupt_weights();

  /// --on-failure shrink: the state before the last step, kept in memory; restore_previous() goes back to it.
  void remember();
  void restore_previous();
  /// Trains on with `group` (the survivors after a shrink): the same global batch, re-sharded over its ranks.
  void rebind(dcomm::ProcessGroup& group);

  int64_t steps_done() const { return steps_done_; }
  /// FNV-1a of the weights, the optimizer state and the sampler's RNG state.
  uint64_t fingerprint() const;
  const Mlp& model() const { return model_; }
  const Dataset& data() const { return data_; }
  const GradSync& sync(bool bucketing) const { return bucketing ? *bucketed_ : *per_tensor_; }

 private:
  std::vector<uint8_t> optimizer_state() const;

  struct Saved {
    std::vector<float> params;
    std::vector<uint8_t> optimizer;
    Rng::State rng{};
    int64_t steps_done = -1;
  };

  dcomm::ProcessGroup* group_;
  TrainOptions options_;
  std::size_t global_batch_;  ///< samples per step over all ranks: --batch times the starting group's size
  Dataset data_;
  Mlp model_;
  std::unique_ptr<Optimizer> optimizer_;
  Rng sampler_;
  std::vector<float> grad_;
  std::unique_ptr<GradSync> bucketed_;
  std::unique_ptr<GradSync> per_tensor_;
  Saved saved_;
  int64_t steps_done_ = 0;
};

}  // namespace examples
