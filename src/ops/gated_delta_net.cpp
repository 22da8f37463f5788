#include "ops/gated_delta_net.h"

#include <cmath>
#include <vector>

#include "ops/reference.h"

// Precision: inputs, outputs and the carried state are fp32 (as HF), but every sum, product
// chain and decay inside a call is evaluated in double and rounded once. The reference then
// sits as close to exact arithmetic as fp32 storage allows. That matters here: the gated
// RMSNorm after this op divides by the RMS of each head's output, which can be orders of
// magnitude smaller than the terms it is summed from, so fp32 accumulation noise is amplified
// far past 1e-4 in small random models (and, for W4A4 models, flips MXFP4 rounding ties).
namespace stave::ref {
namespace {

// HF l2norm: x · rsqrt(Σx² + 1e-6), then (for q) · d^{-1/2}.
void l2_normalize(const float* x, int64_t d, double post_scale, double* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = post_scale / std::sqrt(ss + 1e-6);
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv;
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

int64_t head_ratio(const GatedDeltaDims& d) { return d.n_v_heads / d.n_k_heads; }

constexpr int64_t kMinParallelWork = int64_t{1} << 22;  // ~ multiply-adds below which one thread is faster

}  // namespace

void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
               int64_t n_v, float* g, float* beta) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < n_v; ++h) {
      const int64_t i = t * n_v + h;
      // softplus with torch's threshold 20, evaluated in double
      const double x = static_cast<double>(a[i]) + dt_bias[h];
      const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
      g[i] = static_cast<float>(-std::exp(static_cast<double>(A_log[h])) * sp);
      beta[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(b[i]))));
    }
}

void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = head_ratio(dims);
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(dk));
  // Threads only pay off past tiny problems (and cost a lot on a busy machine).
  const bool parallel = in.tokens * dims.state_floats() >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    float* state_h = state + h * dk * dv;                // [dk, dv]
    std::vector<double> S(state_h, state_h + dk * dv);   // worked on in double, stored back once
    std::vector<double> q(dk), k(dk), e(dv);
    for (int64_t t = 0; t < in.tokens; ++t) {
      l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, q.data());
      l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0, k.data());
      const float* v = in.v + t * in.stride + h * dv;
      const double alpha = std::exp(static_cast<double>(in.g[t * nv + h]));
      const double beta = in.beta[t * nv + h];
      for (double& s : S) s *= alpha;
      for (int64_t j = 0; j < dv; ++j) {
        double kv = 0.0;  // (Sᵀ k)_j
        for (int64_t i = 0; i < dk; ++i) kv += S[i * dv + j] * k[i];
        e[j] = (v[j] - kv) * beta;
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * e[j];
      float* o = out + t * nv * dv + h * dv;
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0.0;
        for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * q[i];
        o[j] = static_cast<float>(acc);
      }
    }
    for (int64_t i = 0; i < dk * dv; ++i) state_h[i] = static_cast<float>(S[i]);
  }
}

void gated_delta_rule_chunked(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                              int64_t chunk) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = head_ratio(dims);
  const int64_t C = chunk;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const bool parallel = in.tokens * dims.state_floats() >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    float* state_h = state + h * dk * dv;               // [dk, dv]
    std::vector<double> S(state_h, state_h + dk * dv);
    // Chunk-sized scratch: O(C·(d_k + d_v) + C²) per head.
    std::vector<double> Q(C * dk), K(C * dk), V(C * dv), gam(C), bet(C);
    std::vector<double> U(C * dv), W(C * dk), Lrow(C), decay(C * C);
    for (int64_t c0 = 0; c0 < in.tokens; c0 += C) {
      const int64_t c = std::min(C, in.tokens - c0);
      double cum = 0.0;
      for (int64_t i = 0; i < c; ++i) {
        const int64_t t = c0 + i;
        l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, &Q[i * dk]);
        l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0, &K[i * dk]);
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
        const double eg = std::exp(gam[i]);
        for (int64_t a = 0; a < dv; ++a) U[i * dv + a] = V[i * dv + a] * bet[i];
        for (int64_t a = 0; a < dk; ++a) W[i * dk + a] = K[i * dk + a] * bet[i] * eg;
        for (int64_t j = 0; j < i; ++j) {
          const double l = Lrow[j];
          for (int64_t a = 0; a < dv; ++a) U[i * dv + a] -= l * U[j * dv + a];
          for (int64_t a = 0; a < dk; ++a) W[i * dk + a] -= l * W[j * dk + a];
        }
      }
      // V' = U − W S  (stored over U): the deltas against the state entering the chunk.
      for (int64_t i = 0; i < c; ++i)
        for (int64_t a = 0; a < dk; ++a) {
          const double w = W[i * dk + a];
          const double* s = &S[a * dv];
          for (int64_t b = 0; b < dv; ++b) U[i * dv + b] -= w * s[b];
        }
      // O_i = e^{γ_i} q_iᵀ S + Σ_{j≤i} (q_i·k_j) Γ_ij V'_j
      std::vector<double> o(dv);
      for (int64_t i = 0; i < c; ++i) {
        const double eg = std::exp(gam[i]);
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t a = 0; a < dk; ++a) {
          const double qa = Q[i * dk + a] * eg;
          const double* s = &S[a * dv];
          for (int64_t b = 0; b < dv; ++b) o[b] += qa * s[b];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double p = dot(&Q[i * dk], &K[j * dk], dk) * decay[i * C + j];
          for (int64_t b = 0; b < dv; ++b) o[b] += p * U[j * dv + b];
        }
        float* dst = out + (c0 + i) * nv * dv + h * dv;
        for (int64_t b = 0; b < dv; ++b) dst[b] = static_cast<float>(o[b]);
      }
      // S ← e^{γ_last} S + Σ_j (k_j e^{γ_last − γ_j}) V'_jᵀ
      const double glast = gam[c - 1];
      const double e_last = std::exp(glast);
      for (double& s : S) s *= e_last;
      for (int64_t j = 0; j < c; ++j) {
        const double f = std::exp(glast - gam[j]);
        for (int64_t a = 0; a < dk; ++a) {
          const double ka = K[j * dk + a] * f;
          double* s = &S[a * dv];
          for (int64_t b = 0; b < dv; ++b) s[b] += ka * U[j * dv + b];
        }
      }
    }
    for (int64_t i = 0; i < dk * dv; ++i) state_h[i] = static_cast<float>(S[i]);
  }
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double zz = zr[i];
      yr[i] = static_cast<float>(w[i] * (xr[i] * inv) * (zz / (1.0 + std::exp(-zz))));
    }
  }
}

}  // namespace stave::ref
