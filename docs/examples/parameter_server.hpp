#pragma once
// The parameter server of sgd_variants (rank 0): owns the model, hands it to the learners, collects their gradients
// with any-source receives tagged by model version, and updates the model by the rules of each variant.

#include <cstdint>
#include <dcomm/dcomm.hpp>

#include "sgd_protocol.hpp"

namespace examples {

struct VariantResult {
  Variant variant = Variant::kFullySync;
  double seconds = 0;  ///< from the first model sent to the last update
  double epochs = 0;   ///< mini-batch gradients applied / mini-batches per epoch
  int64_t updates = 0;
  int64_t applied = 0;  ///< gradients that went into an update
  double initial_loss = 0;
  double final_loss = 0;
  double mean_staleness = 0;  ///< versions between a gradient's model and the model it updated
  int64_t cancelled = 0;      ///< posted receives withdrawn because the update no longer needed them
  int64_t discarded = 0;      ///< gradients received but not used (a receive matched just as it was cancelled)
  int64_t drained = 0;        ///< gradients sent but never matched during the run, received at the end
  int64_t interrupted = 0;    ///< learner computations cut short by a newer model
  int64_t sent = 0;           ///< gradients the learners sent: applied + discarded + drained
};

/// Runs one variant to `config.epochs` epochs, stops the learners and accounts for every gradient they sent.
VariantResult run_parameter_server(dcomm::ProcessGroup& group, Variant variant, const VariantsConfig& config,
                                   const Tags& tags);

}  // namespace examples
