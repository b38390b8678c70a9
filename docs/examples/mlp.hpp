#pragma once
// A multi-layer perceptron (tanh hidden layers, softmax cross-entropy output) whose parameters live in ONE flat
// float array. A flat array is what makes the distributed parts short: a gradient bucket is a contiguous slice
// that one all_reduce can average in place, the optimizer is a loop over one array, a checkpoint is one write,
// and the weights' fingerprint is one hash.
//
// Tensors are numbered in forward order: W0, b0, W1, b1, ... (Wl is out x in, row-major). The backward pass
// produces them in reverse order and reports each one the moment its gradient is final, which is the hook the
// bucketed gradient all-reduce uses to overlap communication with the rest of the backward pass.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dataset.hpp"

namespace examples {

struct TensorSlice {
  std::size_t offset = 0;  ///< in floats, into the flat parameter (and gradient) array
  std::size_t count = 0;
};

/// {dim, hidden..., classes}: the widths of a classifier for `dim` inputs and `classes` classes.
std::vector<int> layer_widths(int dim, const std::vector<int>& hidden, int classes);

class Mlp {
 public:
  /// Layer widths, input first and classes last, e.g. {16, 64, 64, 4}. Weights are drawn from `seed`.
  Mlp(std::vector<int> widths, uint64_t seed);

  const std::vector<int>& widths() const { return widths_; }
  const std::vector<TensorSlice>& tensors() const { return tensors_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::size_t param_count() const { return params_.size(); }

  /// Called with a tensor's index as soon as its gradient is final.
  using GradReady = std::function<void(std::size_t tensor)>;

  /// Mean cross-entropy over the samples `indices` of `data`; writes the gradient of that mean into `grad`
  /// (param_count() floats, overwritten) and calls `ready` for each tensor, last tensor first.
  double forward_backward(const Dataset& data, std::span<const uint32_t> indices, std::span<float> grad,
                          const GradReady& ready = {});

  /// Mean cross-entropy and accuracy over the whole data set (forward only).
  struct Eval {
    double loss = 0;
    double accuracy = 0;
  };
  Eval evaluate(const Dataset& data) const;

 private:
  std::size_t layers() const { return widths_.size() - 1; }
  const float* weight(std::size_t l) const { return params_.data() + tensors_[2 * l].offset; }
  const float* bias(std::size_t l) const { return params_.data() + tensors_[2 * l + 1].offset; }
  // Activations of every layer for a batch of rows; returns the summed loss and fills `correct`.
  double forward(const Dataset& data, std::span<const uint32_t> indices, std::vector<std::vector<float>>* acts,
                 std::size_t* correct) const;

  std::vector<int> widths_;
  std::vector<TensorSlice> tensors_;
  std::vector<float> params_;
};

}  // namespace examples
