#include "mlp.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace examples {

std::vector<int> layer_widths(int dim, const std::vector<int>& hidden, int classes) {
  std::vector<int> w{dim};
  w.insert(w.end(), hidden.begin(), hidden.end());
  w.push_back(classes);
  return w;
}

Mlp::Mlp(std::vector<int> widths, uint64_t seed) : widths_(std::move(widths)) {
  if (widths_.size() < 2 || std::any_of(widths_.begin(), widths_.end(), [](int w) { return w <= 0; })) {
    throw std::invalid_argument("Mlp: need at least an input and an output width, all > 0");
  }
  std::size_t offset = 0;
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    tensors_.push_back({offset, out * in});
    offset += out * in;
    tensors_.push_back({offset, out});
    offset += out;
  }
  params_.assign(offset, 0.0f);
  // Xavier-style scale keeps tanh units out of saturation; biases start at zero.
  Rng rng(seed);
  for (std::size_t l = 0; l < layers(); ++l) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(widths_[l]));
    const TensorSlice& w = tensors_[2 * l];
    for (std::size_t i = 0; i < w.count; ++i) params_[w.offset + i] = static_cast<float>(rng.normal() * scale);
  }
}

double Mlp::forward(const Dataset& data, std::span<const uint32_t> indices, std::vector<std::vector<float>>* acts,
                    std::size_t* correct) const {
  if (data.dim != widths_.front() || data.classes != widths_.back()) {
    throw std::invalid_argument("Mlp: data set shape (dim " + std::to_string(data.dim) + ", classes " +
                                std::to_string(data.classes) + ") does not fit the model's widths");
  }
  const std::size_t batch = indices.size();
  acts->assign(widths_.size(), {});
  std::vector<float>& input = (*acts)[0];
  input.resize(batch * widths_[0]);
  for (std::size_t b = 0; b < batch; ++b) {
    std::copy_n(data.row(indices[b]), widths_[0], input.data() + b * widths_[0]);
  }
  for (std::size_t l = 0; l < layers(); ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    const std::vector<float>& a = (*acts)[l];
    std::vector<float>& z = (*acts)[l + 1];
    z.resize(batch * out);
    const float* w = weight(l);
    const float* bias_l = bias(l);
    for (std::size_t b = 0; b < batch; ++b) {
      for (std::size_t o = 0; o < out; ++o) {
        float sum = bias_l[o];
        for (std::size_t i = 0; i < in; ++i) sum += w[o * in + i] * a[b * in + i];
        z[b * out + o] = (l + 1 < layers()) ? std::tanh(sum) : sum;
      }
    }
  }
  // Softmax in place on the logits, then cross-entropy.
  const std::size_t classes = widths_.back();
  std::vector<float>& p = acts->back();
  double loss = 0;
  *correct = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    float* row = p.data() + b * classes;
    const std::size_t argmax = std::max_element(row, row + classes) - row;
    const float top = row[argmax];
    double denom = 0;
    for (std::size_t c = 0; c < classes; ++c) denom += std::exp(static_cast<double>(row[c] - top));
    for (std::size_t c = 0; c < classes; ++c)
      row[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - top)) / denom);
    const int32_t label = data.y[indices[b]];
    loss -= std::log(std::max(static_cast<double>(row[label]), 1e-30));
    if (static_cast<int32_t>(argmax) == label) ++*correct;
  }
  return loss;
}

double Mlp::forward_backward(const Dataset& data, std::span<const uint32_t> indices, std::span<float> grad,
                             const GradReady& ready) {
  if (grad.size() != params_.size()) throw std::invalid_argument("Mlp::forward_backward: gradient size mismatch");
  std::vector<std::vector<float>> acts;
  std::size_t correct = 0;
  const std::size_t batch = indices.size();
  if (batch == 0) throw std::invalid_argument("Mlp::forward_backward: empty batch");
  const double loss = forward(data, indices, &acts, &correct);

  // dz: gradient of the mean loss with respect to the current layer's pre-activations.
  const std::size_t classes = widths_.back();
  std::vector<float> dz = acts.back();
  for (std::size_t b = 0; b < batch; ++b) dz[b * classes + data.y[indices[b]]] -= 1.0f;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (float& v : dz) v *= inv_batch;

  std::vector<float> da;
  for (std::size_t l = layers(); l-- > 0;) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    const std::vector<float>& a = acts[l];
    float* gw = grad.data() + tensors_[2 * l].offset;
    float* gb = grad.data() + tensors_[2 * l + 1].offset;
    std::fill_n(gb, out, 0.0f);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t o = 0; o < out; ++o) gb[o] += dz[b * out + o];
    if (ready) ready(2 * l + 1);
    std::fill_n(gw, out * in, 0.0f);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t o = 0; o < out; ++o) {
        const float d = dz[b * out + o];
        for (std::size_t i = 0; i < in; ++i) gw[o * in + i] += d * a[b * in + i];
      }
    if (ready) ready(2 * l);
    if (l == 0) break;
    // Back through the weights and the tanh of the layer below: tanh' = 1 - tanh^2.
    const float* w = weight(l);
    da.assign(batch * in, 0.0f);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t o = 0; o < out; ++o) {
        const float d = dz[b * out + o];
        for (std::size_t i = 0; i < in; ++i) da[b * in + i] += d * w[o * in + i];
      }
    for (std::size_t k = 0; k < da.size(); ++k) da[k] *= 1.0f - a[k] * a[k];
    dz.swap(da);
  }
  return loss / static_cast<double>(batch);
}

Mlp::Eval Mlp::evaluate(const Dataset& data) const {
  std::vector<uint32_t> all(data.size());
  std::iota(all.begin(), all.end(), 0u);
  std::vector<std::vector<float>> acts;
  std::size_t correct = 0;
  const double loss = forward(data, all, &acts, &correct);
  const double n = static_cast<double>(std::max<std::size_t>(data.size(), 1));
  return {loss / n, static_cast<double>(correct) / n};
}

}  // namespace examples
