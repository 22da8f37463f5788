#include "generate/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "stave/errors.h"

namespace stave {
namespace {

double log_sum_exp(std::span<const float> logits) {
  float top = -std::numeric_limits<float>::infinity();
  for (float x : logits) top = std::max(top, x);
  if (!std::isfinite(top)) return top;  // all −inf (or a +inf / NaN logit): nothing to normalise
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - top);
  return top + std::log(sum);
}

double floored(double x) { return std::isnan(x) || x < kLogprobFloor ? kLogprobFloor : x; }

}  // namespace

StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int64_t top_n) {
  const auto V = static_cast<int64_t>(logits.size());
  if (chosen < 0 || chosen >= V) throw Error(ErrorKind::kInternal, "log-probability of a token outside the vocabulary");
  const double lse = log_sum_exp(logits);
  StepLogprobs out;
  out.id = chosen;
  out.logprob = floored(logits[static_cast<size_t>(chosen)] - lse);
  const int64_t n = std::clamp<int64_t>(top_n, 0, V);
  if (n == 0) return out;
  // One pass keeping the n best in order (n ≤ a few tens): most ids fail the first comparison.
  auto key = [&](int32_t i) {  // NaN ranks last
    const float x = logits[static_cast<size_t>(i)];
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  auto before = [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(n) + 1);
  for (int32_t i = 0; i < static_cast<int32_t>(V); ++i) {
    if (static_cast<int64_t>(best.size()) == n && !before(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, before), i);
    if (static_cast<int64_t>(best.size()) > n) best.pop_back();
  }
  out.top.reserve(best.size());
  for (int32_t id : best) out.top.push_back({id, floored(logits[static_cast<size_t>(id)] - lse)});
  return out;
}

}  // namespace stave
