#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace stave {
namespace {

void check_range(bool ok, const char* name, double value, const char* want) {
  if (!ok)
    throw Error(ErrorKind::kInvalidRequest, std::string(name) + " must be " + want + ", got " + std::to_string(value));
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplingOptions& o) : options_(o) {
  check_range(std::isfinite(o.temperature) && o.temperature >= 0.0, "temperature", o.temperature, "≥ 0");
  check_range(o.top_p > 0.0 && o.top_p <= 1.0, "top_p", o.top_p, "in (0, 1]");
  check_range(o.top_k >= 0, "top_k", static_cast<double>(o.top_k), "≥ 0 (0: off)");
  check_range(o.min_p >= 0.0 && o.min_p <= 1.0, "min_p", o.min_p, "in [0, 1]");
  check_range(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0.0, "repetition_penalty",
              o.repetition_penalty, "> 0");
  check_range(std::isfinite(o.presence_penalty) && std::fabs(o.presence_penalty) <= 2.0, "presence_penalty",
              o.presence_penalty, "in [-2, 2]");
  check_range(std::isfinite(o.frequency_penalty) && std::fabs(o.frequency_penalty) <= 2.0, "frequency_penalty",
              o.frequency_penalty, "in [-2, 2]");
  if (o.seed) {
    rng_.seed(*o.seed);
  } else {
    std::random_device rd;
    rng_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  }
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> generated) const {
  const auto V = static_cast<int32_t>(logits.size());
  auto in_vocab = [V](int32_t id) { return id >= 0 && id < V; };
  if (options_.repetition_penalty != 1.0) {
    std::unordered_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(generated.begin(), generated.end());
    const auto p = static_cast<float>(options_.repetition_penalty);
    for (int32_t id : seen)
      if (in_vocab(id)) logits[id] = logits[id] > 0 ? logits[id] / p : logits[id] * p;
  }
  if (options_.presence_penalty != 0.0 || options_.frequency_penalty != 0.0) {
    std::unordered_map<int32_t, int64_t> count;
    for (int32_t id : generated) ++count[id];
    for (const auto& [id, n] : count)
      if (in_vocab(id))
        logits[id] -= static_cast<float>(options_.presence_penalty + options_.frequency_penalty * static_cast<double>(n));
  }
}

int32_t Sampler::pick(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> generated) {
  if (logits.empty()) throw Error(ErrorKind::kInternal, "sampling from an empty vocabulary");
  apply_penalties(logits, prompt, generated);
  if (greedy()) return argmax(logits);
  return sample(logits);
}

int32_t Sampler::sample(std::span<const float> logits) {
  const auto V = static_cast<int64_t>(logits.size());
  const double inv_t = 1.0 / options_.temperature;
  if (options_.top_k == 0 && options_.top_p >= 1.0 && options_.min_p == 0.0) {
    // The whole vocabulary: no ordering needed.
    const float top = logits[argmax(logits)];
    double sum = 0.0;
    std::vector<double>& p = probs_;
    p.resize(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i) sum += p[i] = std::exp((logits[i] - top) * inv_t);
    const double u = std::uniform_real_distribution<double>(0.0, sum)(rng_);
    double acc = 0.0;
    for (int64_t i = 0; i < V; ++i) {
      acc += p[i];
      if (u < acc) return static_cast<int32_t>(i);
    }
    return argmax(logits);
  }
  // Candidates sorted by logit, best first (ties: lower id first); top-k keeps a prefix.
  const int64_t keep_k = options_.top_k > 0 ? std::min<int64_t>(options_.top_k, V) : V;
  order_.resize(static_cast<size_t>(V));
  std::iota(order_.begin(), order_.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::partial_sort(order_.begin(), order_.begin() + keep_k, order_.end(), better);
  order_.resize(static_cast<size_t>(keep_k));

  // Softmax at the temperature over the kept candidates (double).
  const double top = logits[order_[0]];
  std::vector<double> p(order_.size());
  double sum = 0.0;
  for (size_t i = 0; i < order_.size(); ++i) sum += p[i] = std::exp((logits[order_[i]] - top) * inv_t);
  for (double& x : p) x /= sum;

  // min-p: p ≥ min_p · p_max (p_max = p[0]); top-p: the shortest prefix with mass ≥ top_p.
  size_t n = p.size();
  if (options_.min_p > 0.0)
    while (n > 1 && p[n - 1] < options_.min_p * p[0]) --n;
  if (options_.top_p < 1.0) {
    double mass = 0.0;
    size_t m = 0;
    while (m < n) {
      mass += p[m++];
      if (mass >= options_.top_p) break;
    }
    n = m;
  }
  double kept = 0.0;
  for (size_t i = 0; i < n; ++i) kept += p[i];
  const double u = std::uniform_real_distribution<double>(0.0, kept)(rng_);
  double acc = 0.0;
  for (size_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return order_[i];
  }
  return order_[n - 1];
}

}  // namespace stave
