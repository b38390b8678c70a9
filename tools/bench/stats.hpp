#pragma once
// Summaries of timing samples: mean, min, max and nearest-rank percentiles.

#include <vector>

namespace dcomm::bench {

/// Nearest-rank percentile (p in [0, 100]) of the samples: the smallest sample with at least p% of the samples at
/// or below it. 0 for no samples. Takes a copy because it sorts.
double percentile(std::vector<double> samples, double p);
double mean(const std::vector<double>& samples);

struct Summary {
  double mean = 0, min = 0, max = 0, p50 = 0, p99 = 0;
};
Summary summarize(const std::vector<double>& samples);

}  // namespace dcomm::bench
