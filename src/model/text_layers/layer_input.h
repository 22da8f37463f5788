// The input of a decoder layer's mixer as the products over it take it: the residual stream's
// input norm, formed by the products' own backend op (after adding the previous layer's pending
// MLP output), so that a backend can form the norm inside their input quantization
// (Backend::add_rms_norm_linear_shared). The default backend op is the composition: the same
// numerics as adding, norming and then projecting.
#pragma once
#include <cstdint>
#include <span>

#include "ops/backend.h"

namespace stave {

struct LayerInput {
  float* h = nullptr;               // the residual stream rows [rows, hidden], updated
  const float* residual = nullptr;  // added to h first (the previous layer's MLP output), or null
  const float* norm_w = nullptr;    // the layer's input_layernorm (zero-centred) [hidden]
  float eps = 0.0f;
  float* x = nullptr;               // scratch [rows, hidden] for the norm, where the backend writes it

  // outs[i].y = norm(h += residual) · Wᵢᵀ, every outs[i].w.in == hidden.
  void project(const Backend& backend, int64_t rows, std::span<const Backend::LinearOutput> outs) const {
    backend.add_rms_norm_linear_shared(h, residual, rows, outs.front().w.in, norm_w, eps, x, outs);
  }
};

}  // namespace stave
