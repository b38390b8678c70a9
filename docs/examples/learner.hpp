#pragma once
// A learner of sgd_variants: receives models from the parameter server, computes mini-batch gradients on them
// (after an injected straggler delay), and sends them back tagged with the model's version.

#include <dcomm/dcomm.hpp>

#include "sgd_protocol.hpp"

namespace examples {

/// Runs one variant on this learner until the PS says stop, then reports what it sent. Every receive it posts is
/// matched (the last one by the stop message), and every send completes before it returns.
void run_learner(dcomm::ProcessGroup& group, Variant variant, const VariantsConfig& config, const Tags& tags);

}  // namespace examples
