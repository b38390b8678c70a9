#pragma once
// The optimizers of the data-parallel example: SGD with momentum, and Adam. Both update the flat parameter array
// from the flat (already averaged) gradient. Because every rank applies the same update to the same weights with
// the same averaged gradient, the weights stay bit-identical across ranks; the optimizer state (momentum buffers,
// Adam's moments and step count) is part of every checkpoint so that a resumed run continues exactly.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bytes.hpp"

namespace examples {

struct OptimizerConfig {
  std::string name = "sgd";  ///< "sgd" (with momentum) or "adam"
  float lr = 0.1f;
  float momentum = 0.9f;  ///< sgd
  float beta1 = 0.9f;     ///< adam
  float beta2 = 0.999f;   ///< adam
  float eps = 1e-8f;      ///< adam
  float weight_decay = 0.0f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  /// params -= update(grad); both hold the same number of floats as the optimizer was made for.
  virtual void step(std::span<float> params, std::span<const float> grad) = 0;
  /// The state a resumed run needs, and its restoration (throws std::runtime_error on a mismatch).
  virtual void save(ByteWriter& out) const = 0;
  virtual void load(ByteReader& in) = 0;
};

/// Makes the optimizer `config.name` for `param_count` parameters; throws std::invalid_argument for an unknown name.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t param_count);

}  // namespace examples
