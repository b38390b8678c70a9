#pragma once
// The data-parallel trainer's command line.

#include <cstdint>
#include <string>
#include <vector>

#include "mlp.hpp"
#include "optimizer.hpp"

namespace examples {

struct TrainOptions {
  int steps = 200;
  int batch = 32;              ///< samples per rank per step
  std::size_t samples = 4096;  ///< size of the synthetic data set
  int dim = 16;
  std::vector<int> hidden = {64, 64};
  int classes = 4;
  uint64_t seed = 1;
  OptimizerConfig optimizer;
  bool bucketing = true;
  std::size_t bucket_bytes = 64 << 10;
  std::string algorithm;  ///< all_reduce algorithm; empty: the group's choice
  int ckpt_every = 0;     ///< 0: no snapshots
  std::string ckpt_dir;
  int kill_at_step = -1;     ///< -1: never
  int corrupt_at_step = -1;  ///< -1: never
  int fault_rank = -1;       ///< the rank the two faults hit; -1: the last rank
  int log_every = 10;
  /// "stop" (a failure ends the run; dcomm-run may restart it from a snapshot) or "shrink" (the survivors shrink
  /// the group, re-shard the batch over themselves and go on from their in-memory state; run under dcomm-run
  /// --keep-going).
  std::string on_failure = "stop";
  bool benchmark = false;  ///< time bucketed against per-tensor all-reduce instead of training

  std::vector<int> widths() const { return layer_widths(dim, hidden, classes); }
};

/// Parses argv; prints help or the error and exits (0 for --help, 2 for a bad flag) as CLI11 apps do.
TrainOptions parse_train_options(int argc, char** argv);

}  // namespace examples
