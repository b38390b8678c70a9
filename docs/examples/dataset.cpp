#include "dataset.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace examples {

namespace {
constexpr int kTeacherHidden = 32;
}  // namespace

Dataset make_teacher_dataset(std::size_t n, int dim, int classes, uint64_t seed) {
  if (dim <= 0 || classes < 2) {
    throw std::invalid_argument("make_teacher_dataset: dim must be > 0 and classes >= 2 (got dim " +
                                std::to_string(dim) + ", classes " + std::to_string(classes) + ")");
  }
  Rng rng(seed);
  // The teacher: dim -> 32 tanh units -> classes, with weights large enough to make the classes separable.
  std::vector<double> w1(static_cast<std::size_t>(kTeacherHidden) * dim),
      w2(static_cast<std::size_t>(classes) * kTeacherHidden);
  for (double& w : w1) w = rng.normal() * 2.0 / std::sqrt(static_cast<double>(dim));
  for (double& w : w2) w = rng.normal() * 2.0 / std::sqrt(static_cast<double>(kTeacherHidden));

  Dataset data;
  data.dim = dim;
  data.classes = classes;
  data.x.resize(n * static_cast<std::size_t>(dim));
  data.y.resize(n);
  std::vector<double> hidden(kTeacherHidden);
  for (std::size_t i = 0; i < n; ++i) {
    float* xi = data.x.data() + i * static_cast<std::size_t>(dim);
    for (int d = 0; d < dim; ++d) xi[d] = static_cast<float>(rng.normal());
    for (int h = 0; h < kTeacherHidden; ++h) {
      double z = 0;
      for (int d = 0; d < dim; ++d) z += w1[static_cast<std::size_t>(h) * dim + d] * xi[d];
      hidden[h] = std::tanh(z);
    }
    int best = 0;
    double best_logit = -1e300;
    for (int c = 0; c < classes; ++c) {
      double z = 0;
      for (int h = 0; h < kTeacherHidden; ++h) z += w2[static_cast<std::size_t>(c) * kTeacherHidden + h] * hidden[h];
      if (z > best_logit) best_logit = z, best = c;
    }
    data.y[i] = best;
  }
  return data;
}

std::vector<uint32_t> draw_indices(Rng& rng, std::size_t n, std::size_t count) {
  std::vector<uint32_t> idx(count);
  for (uint32_t& i : idx) i = static_cast<uint32_t>(rng.below(n));
  return idx;
}

}  // namespace examples
