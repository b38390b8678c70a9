#include "optimizer.hpp"

#include <cmath>
#include <stdexcept>

namespace examples {

namespace {

void check_sizes(const char* who, std::size_t state, std::span<float> params, std::span<const float> grad) {
  if (params.size() != state || grad.size() != state) {
    throw std::invalid_argument(std::string(who) + ": made for " + std::to_string(state) + " parameters, got " +
                                std::to_string(params.size()) + " parameters and " + std::to_string(grad.size()) +
                                " gradients");
  }
}

std::vector<float> load_state(ByteReader& in, const char* what, std::size_t expected) {
  std::vector<float> v = in.get_array<float>();
  if (v.size() != expected) {
    throw std::runtime_error(std::string("optimizer state '") + what + "' has " + std::to_string(v.size()) +
                             " values, the model has " + std::to_string(expected) + " parameters");
  }
  return v;
}

// Heavy-ball momentum, as torch.optim.SGD: v = momentum * v + g; p -= lr * v.
class SgdMomentum final : public Optimizer {
 public:
  SgdMomentum(const OptimizerConfig& c, std::size_t n) : config_(c), velocity_(n, 0.0f) {}
  const char* name() const override { return "sgd"; }
  void step(std::span<float> params, std::span<const float> grad) override {
    check_sizes("sgd", velocity_.size(), params, grad);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const float g = grad[i] + config_.weight_decay * params[i];
      velocity_[i] = config_.momentum * velocity_[i] + g;
      params[i] -= config_.lr * velocity_[i];
    }
  }
  void save(ByteWriter& out) const override { out.put_array(velocity_); }
  void load(ByteReader& in) override { velocity_ = load_state(in, "velocity", velocity_.size()); }

 private:
  OptimizerConfig config_;
  std::vector<float> velocity_;
};

// Adam (Kingma & Ba) with bias correction; the step count t is state too.
class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, std::size_t n) : config_(c), m_(n, 0.0f), v_(n, 0.0f) {}
  const char* name() const override { return "adam"; }
  void step(std::span<float> params, std::span<const float> grad) override {
    check_sizes("adam", m_.size(), params, grad);
    ++t_;
    const double c1 = 1.0 - std::pow(static_cast<double>(config_.beta1), static_cast<double>(t_));
    const double c2 = 1.0 - std::pow(static_cast<double>(config_.beta2), static_cast<double>(t_));
    const float step_size = static_cast<float>(config_.lr / c1);
    const float root_c2 = static_cast<float>(std::sqrt(c2));
    for (std::size_t i = 0; i < params.size(); ++i) {
      const float g = grad[i] + config_.weight_decay * params[i];
      m_[i] = config_.beta1 * m_[i] + (1.0f - config_.beta1) * g;
      v_[i] = config_.beta2 * v_[i] + (1.0f - config_.beta2) * g * g;
      params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) / root_c2 + config_.eps);
    }
  }
  void save(ByteWriter& out) const override {
    out.put<int64_t>(t_);
    out.put_array(m_);
    out.put_array(v_);
  }
  void load(ByteReader& in) override {
    t_ = in.get<int64_t>();
    m_ = load_state(in, "m", m_.size());
    v_ = load_state(in, "v", v_.size());
  }

 private:
  OptimizerConfig config_;
  int64_t t_ = 0;
  std::vector<float> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t param_count) {
  if (config.name == "sgd") return std::make_unique<SgdMomentum>(config, param_count);
  if (config.name == "adam") return std::make_unique<Adam>(config, param_count);
  throw std::invalid_argument("unknown optimizer '" + config.name + "' (choose sgd or adam)");
}

}  // namespace examples
