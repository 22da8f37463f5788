#include "measure/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "stave/errors.h"

namespace stave::measure {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) throw Error(ErrorKind::kInvalidRequest, "percentile of an empty sample");
  if (!(q >= 0.0 && q <= 1.0)) throw Error(ErrorKind::kInvalidRequest, "percentile must be in [0, 1]");
  std::sort(samples.begin(), samples.end());
  const double rank = q * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  if (samples.empty()) throw Error(ErrorKind::kInvalidRequest, "summary of an empty sample");
  s.n = static_cast<int>(samples.size());
  auto [mn, mx] = std::minmax_element(samples.begin(), samples.end());
  s.min = *mn;
  s.max = *mx;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double v : samples) ss += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(ss / (s.n - 1));
  }
  s.p50 = percentile(samples, 0.5);
  s.p90 = percentile(samples, 0.9);
  return s;
}

}  // namespace stave::measure
