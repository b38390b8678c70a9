#pragma once
// A synthetic classification data set that every rank builds for itself from a seed, so no files have to be
// shipped to the nodes: inputs are standard normal vectors, and labels are the argmax of a fixed random "teacher"
// network. A student MLP of similar size can learn it, so the loss visibly falls.

#include <cstdint>
#include <vector>

#include "rng.hpp"

namespace examples {

struct Dataset {
  int dim = 0;
  int classes = 0;
  std::vector<float> x;    ///< size() * dim inputs, row-major
  std::vector<int32_t> y;  ///< size() labels in [0, classes)

  std::size_t size() const { return y.size(); }
  const float* row(std::size_t i) const { return x.data() + i * static_cast<std::size_t>(dim); }
};

/// n samples of dimension `dim` labelled by a teacher with `classes` outputs; the same seed gives the same data.
Dataset make_teacher_dataset(std::size_t n, int dim, int classes, uint64_t seed);

/// `count` sample indices drawn uniformly (with replacement) from [0, n). Every rank draws the same global
/// batch from an identically seeded Rng and keeps its own slice, so the RNG state is the same on every rank
/// and one checkpoint of it serves them all.
std::vector<uint32_t> draw_indices(Rng& rng, std::size_t n, std::size_t count);

}  // namespace examples
