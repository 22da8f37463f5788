// Summary statistics of repeated timings (numpy's default "linear" percentile, so figures
// compare with the usual tools).
#pragma once
#include <vector>

namespace stave::measure {

// q in [0, 1]; linear interpolation between closest ranks: rank (n-1)·q. Throws
// stave::Error(kInvalidRequest) on an empty sample or q outside [0, 1].
double percentile(std::vector<double> samples, double q);

struct Summary {
  int n = 0;
  double min = 0, max = 0, mean = 0, stddev = 0;  // stddev: sample (n-1), 0 for n = 1
  double p50 = 0, p90 = 0;
};
Summary summarize(const std::vector<double>& samples);

}  // namespace stave::measure
