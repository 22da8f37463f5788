#include "synth/random_weights.h"

#include <array>
#include <cmath>

namespace stave::synth {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A table of standard-normal samples (Box–Muller from a fixed stream): drawing by random index
// is an order of magnitude faster than a normal distribution per element, which matters when
// writing 27 billion weights.
const std::array<float, 65536>& normal_table() {
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    uint64_t state = 12345;
    for (size_t i = 0; i < t.size(); i += 2) {
      double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
      double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
      double r = std::sqrt(-2.0 * std::log(u1));
      t[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
      t[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
    }
    return t;
  }();
  return table;
}

}  // namespace

Distribution distribution_for(const std::string& name, int64_t in_features) {
  Distribution d;
  if (ends_with(name, "linear_attn.A_log")) {
    d.log_uniform_1_16 = true;
  } else if (ends_with(name, "linear_attn.dt_bias")) {
    d.mean = 0.0, d.std = 0.5;
  } else if (ends_with(name, "linear_attn.norm.weight")) {  // plain (not zero-centred) weight
    d.mean = 1.0, d.std = 0.05;
  } else if (contains(name, "language_model.") && (ends_with(name, "norm.weight"))) {  // zero-centred (1 + w)
    d.mean = 0.0, d.std = 0.05;
  } else if (ends_with(name, "norm.weight") || ends_with(name, "norm1.weight") || ends_with(name, "norm2.weight") ||
             ends_with(name, "norm3.weight")) {  // LayerNorm gamma (head, vision)
    d.mean = 1.0, d.std = 0.05;
  } else if (ends_with(name, "bias") || ends_with(name, "in_proj_bias")) {
    d.mean = 0.0, d.std = 0.02;
  } else if (ends_with(name, "_logit_scale") || ends_with(name, "residual_gate")) {
    d.mean = 0.0, d.std = 0.5;
  } else if (contains(name, "embed_tokens") || contains(name, "lm_head") || contains(name, "pos_embed") ||
             contains(name, "type_embedding")) {
    d.mean = 0.0, d.std = 0.02;
  } else if (contains(name, "conv1d")) {
    d.mean = 0.0, d.std = 0.5;
  } else {  // linear weights: variance-preserving scale, like a trained model's activations
    d.mean = 0.0, d.std = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.02;
  }
  return d;
}

void fill_values(uint64_t seed, const std::string& name, const Distribution& d, uint64_t first, uint64_t n, float* out) {
  const auto& table = normal_table();
  // Streams restart every 4096 elements so that any range can be produced independently.
  constexpr uint64_t kStride = 4096;
  uint64_t base = seed * 0x9e3779b97f4a7c15ull ^ hash_name(name);
  uint64_t i = first;
  while (i < first + n) {
    uint64_t block = i / kStride;
    uint64_t state = base ^ (block * 0xd1b54a32d192ed03ull);
    uint64_t skip = i - block * kStride;
    for (uint64_t s = 0; s < skip; ++s) splitmix64(state);
    uint64_t end = std::min(first + n, (block + 1) * kStride);
    for (; i < end; ++i) {
      uint64_t r = splitmix64(state);
      float v;
      if (d.log_uniform_1_16) {
        double u = static_cast<double>(r >> 11) * 0x1.0p-53;
        v = static_cast<float>(std::log(1.0 + 15.0 * u));
      } else {
        v = static_cast<float>(d.mean + d.std * table[r & 0xffff]);
      }
      out[i - first] = v;
    }
  }
}

}  // namespace stave::synth
