// Deterministic pseudo-random weights with trained-model-like statistics: every tensor gets a
// stream seeded by (seed, tensor name, chunk), so generation is reproducible and parallel.
#pragma once
#include <cstdint>
#include <string>

namespace stave::synth {

// How the values of a tensor are distributed: value = mean + std · N(0,1), or for the GDN decay
// parameter A_log, log(U(1, 16)).
struct Distribution {
  double mean = 0.0;
  double std = 0.02;
  bool log_uniform_1_16 = false;
};

// Chooses the distribution from the tensor's name and logical shape ([out, in] for linears).
Distribution distribution_for(const std::string& name, int64_t in_features);

// Fills out[0..n) with the values of elements [first, first + n) of the tensor.
void fill_values(uint64_t seed, const std::string& name, const Distribution& d, uint64_t first, uint64_t n, float* out);

}  // namespace stave::synth
