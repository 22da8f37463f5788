#include "ops/gated_delta_net.h"

#include <cmath>
#include <vector>

#include "ops/reference.h"

namespace stave::ref {
namespace {

// HF l2norm: x · rsqrt(Σx² + 1e-6), then (for q) · d^{-1/2} as a separate product.
void l2_normalize(const float* x, int64_t d, float post_scale, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv;
  if (post_scale != 1.0f)
    for (int64_t i = 0; i < d; ++i) y[i] *= post_scale;
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

int64_t head_ratio(const GatedDeltaDims& d) { return d.n_v_heads / d.n_k_heads; }

}  // namespace

void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
               int64_t n_v, float* g, float* beta) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < n_v; ++h) {
      const int64_t i = t * n_v + h;
      g[i] = -std::exp(A_log[h]) * softplus(a[i] + dt_bias[h]);
      beta[i] = sigmoid(b[i]);
    }
}

void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = head_ratio(dims);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    float* S = state + h * dk * dv;  // [dk, dv]
    std::vector<float> q(dk), k(dk), e(dv);
    for (int64_t t = 0; t < in.tokens; ++t) {
      l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, q.data());
      l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0f, k.data());
      const float* v = in.v + t * in.stride + h * dv;
      const float alpha = std::exp(in.g[t * nv + h]);
      const float beta = in.beta[t * nv + h];
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= alpha;
      for (int64_t j = 0; j < dv; ++j) {
        float kv = 0.0f;  // (Sᵀ k)_j
        for (int64_t i = 0; i < dk; ++i) kv += S[i * dv + j] * k[i];
        e[j] = (v[j] - kv) * beta;
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * e[j];
      float* o = out + t * nv * dv + h * dv;
      for (int64_t j = 0; j < dv; ++j) {
        float acc = 0.0f;
        for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * q[i];
        o[j] = acc;
      }
    }
  }
}

void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                              int64_t chunk) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = head_ratio(dims);
  const int64_t C = chunk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    float* S = state + h * dk * dv;  // [dk, dv]
    // Chunk-sized scratch: O(C·(d_k + d_v) + C²) per head.
    std::vector<float> Q(C * dk), K(C * dk), V(C * dv), gam(C), bet(C);
    std::vector<float> U(C * dv), W(C * dk), Lrow(C), decay(C * C);
    for (int64_t c0 = 0; c0 < in.tokens; c0 += C) {
      const int64_t c = std::min(C, in.tokens - c0);
      float cum = 0.0f;
      for (int64_t i = 0; i < c; ++i) {
        const int64_t t = c0 + i;
        l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, &Q[i * dk]);
        l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0f, &K[i * dk]);
        const float* v = in.v + t * in.stride + h * dv;
        for (int64_t j = 0; j < dv; ++j) V[i * dv + j] = v[j];
        cum += in.g[t * nv + h];
        gam[i] = cum;  // γ_i = Σ_{s≤i} g_s within the chunk
        bet[i] = in.beta[t * nv + h];
      }
      // Γ_ij = exp(γ_i − γ_j) for j ≤ i (every exponent ≤ 0, so no overflow).
      for (int64_t i = 0; i < c; ++i)
        for (int64_t j = 0; j <= i; ++j) decay[i * C + j] = std::exp(gam[i] - gam[j]);
      // (I + L) U = diag(β) V and (I + L) W = diag(β e^γ) K with
      // L_ij = β_i (k_i·k_j) Γ_ij for j < i: forward substitution, row by row.
      for (int64_t i = 0; i < c; ++i) {
        for (int64_t j = 0; j < i; ++j) Lrow[j] = bet[i] * dot(&K[i * dk], &K[j * dk], dk) * decay[i * C + j];
        const float eg = std::exp(gam[i]);
        for (int64_t a = 0; a < dv; ++a) U[i * dv + a] = V[i * dv + a] * bet[i];
        for (int64_t a = 0; a < dk; ++a) W[i * dk + a] = K[i * dk + a] * bet[i] * eg;
        for (int64_t j = 0; j < i; ++j) {
          const float l = Lrow[j];
          for (int64_t a = 0; a < dv; ++a) U[i * dv + a] -= l * U[j * dv + a];
          for (int64_t a = 0; a < dk; ++a) W[i * dk + a] -= l * W[j * dk + a];
        }
      }
      // V' = U − W S  (stored over U): the deltas against the state entering the chunk.
      for (int64_t i = 0; i < c; ++i)
        for (int64_t a = 0; a < dk; ++a) {
          const float w = W[i * dk + a];
          const float* s = S + a * dv;
          for (int64_t b = 0; b < dv; ++b) U[i * dv + b] -= w * s[b];
        }
      // O_i = e^{γ_i} q_iᵀ S + Σ_{j≤i} (q_i·k_j) Γ_ij V'_j
      for (int64_t i = 0; i < c; ++i) {
        float* o = out + (c0 + i) * nv * dv + h * dv;
        const float eg = std::exp(gam[i]);
        for (int64_t b = 0; b < dv; ++b) o[b] = 0.0f;
        for (int64_t a = 0; a < dk; ++a) {
          const float qa = Q[i * dk + a] * eg;
          const float* s = S + a * dv;
          for (int64_t b = 0; b < dv; ++b) o[b] += qa * s[b];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const float p = dot(&Q[i * dk], &K[j * dk], dk) * decay[i * C + j];
          for (int64_t b = 0; b < dv; ++b) o[b] += p * U[j * dv + b];
        }
      }
      // S ← e^{γ_last} S + Σ_j (k_j e^{γ_last − γ_j}) V'_jᵀ
      const float glast = gam[c - 1];
      const float e_last = std::exp(glast);
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= e_last;
      for (int64_t j = 0; j < c; ++j) {
        const float f = std::exp(glast - gam[j]);
        for (int64_t a = 0; a < dk; ++a) {
          const float ka = K[j * dk + a] * f;
          float* s = S + a * dv;
          for (int64_t b = 0; b < dv; ++b) s[b] += ka * U[j * dv + b];
        }
      }
    }
  }
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
  }
}

}  // namespace stave::ref
