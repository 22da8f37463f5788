#include "generate/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
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
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) {  // NaN sorts last, keeping the order strict
    const float x = logits[static_cast<size_t>(i)];
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; });
  out.top.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out.top.push_back({order[static_cast<size_t>(i)], floored(logits[static_cast<size_t>(order[static_cast<size_t>(i)])] - lse)});
  return out;
}

}  // namespace stave
