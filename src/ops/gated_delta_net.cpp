#include "ops/gated_delta_net.h"

#include <cmath>
#include <vector>

#include "ops/reference.h"
#include "ops/torch_cpu_order.h"
#include <algorithm>

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

// HF l2norm in fp32: x · rsqrt((x·x).sum(-1) + 1e-6).
void l2_normalize_f32(const float* x, int64_t d, float* y) {
  const float inv = 1.0f / std::sqrt(torch_order::row_sum_squares(x, d) + 1e-6f);
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv;
}

// torch.linalg.solve_triangular(A, B, upper=False, unitriangular=True) for one chunk, as MKL's
// strsm does it for 64×64 systems: rows < 48 by forward substitution, one FMA chain per element
// starting from b; rows ≥ 48 first subtract the FMA-chain sum over the first 48 columns (a GEMM
// update), then continue the chain. A: [n, lda] (strictly lower part read), B, X: [n, w].
void trsm_unit_lower(const float* A, int64_t lda, int64_t n, const float* B, int64_t w, float* X) {
  constexpr int64_t kPanel = 48;
  const int64_t split = lda == 64 ? kPanel : lda;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < w; ++b) {
      float acc = B[i * w + b];
      int64_t j0 = 0;
      if (i >= split) {
        acc -= torch_order::gemm_dot(A + i * lda, 1, X + b, w, split);
        j0 = split;
      }
      for (int64_t j = j0; j < i; ++j) acc = std::fma(-A[i * lda + j], X[j * w + b], acc);
      X[i * w + b] = acc;
    }
}

int64_t head_ratio(const GatedDeltaDims& d) { return d.n_v_heads / d.n_k_heads; }

constexpr int64_t kMinParallelWork = int64_t{1} << 22;  // ~ multiply-adds below which one thread is faster

}  // namespace

void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
               int64_t n_v, float* g, float* beta) {
  // beta = b.sigmoid();  g = -A_log.exp() * softplus(a + dt_bias)   (fp32, torch's formulas)
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < n_v; ++h) {
      const int64_t i = t * n_v + h;
      const float neg_a = -torch_order::exp(A_log[h]);  // A_log.exp(): torch.exp (MKL vsExp)
      // sigmoid and softplus have AVX-512 kernels: vector steps of 32 (refdiff on public 012: the
      // gates of the last 28 of 1404 elements are the scalar remainder).
      const bool vec = torch_order::aten_vectorized(i, tokens * n_v, tokens * n_v, 32);
      g[i] = neg_a * torch_order::softplus(a[i] + dt_bias[h], vec);
      beta[i] = torch_order::sigmoid(b[i], vec);
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
  // transformers' torch_chunk_gated_delta_rule op by op in fp32, with torch's CPU orders: matmuls
  // are MKL FMA chains (torch_order::gemm_dot), torch.linalg.solve_triangular is MKL's strsm
  // (see trsm_unit_lower), cumsum accumulates in double. Chunks start at this call's first token;
  // a short last chunk equals HF's zero padding (padded rows never reach a valid row).
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, r = head_ratio(dims);
  const int64_t C = chunk;
  const float q_scale = static_cast<float>(std::pow(static_cast<double>(dk), -0.5));
  const bool parallel = in.tokens * dims.state_floats() >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    float* S = state + h * dk * dv;  // [dk, dv], updated in place once per chunk
    std::vector<float> Q(C * dk), K(C * dk), KB(C * dk), VB(C * dv), cum(C), P(C * C), A(C * C);
    std::vector<float> NV(C * dv), KC(C * dk), DKB(C * dk), Vn(C * dv), KT(C * dk), Snew(dk * dv);
    for (int64_t c0 = 0; c0 < in.tokens; c0 += C) {
      const int64_t c = std::min(C, in.tokens - c0);
      double run = 0.0;  // torch.cumsum on CPU accumulates in double
      for (int64_t i = 0; i < c; ++i) {
        const int64_t t = c0 + i;
        l2_normalize_f32(in.q + t * in.stride + kh * dk, dk, &Q[i * dk]);
        for (int64_t a = 0; a < dk; ++a) Q[i * dk + a] *= q_scale;
        l2_normalize_f32(in.k + t * in.stride + kh * dk, dk, &K[i * dk]);
        const float beta = in.beta[t * nv + h];
        const float* v = in.v + t * in.stride + h * dv;
        for (int64_t a = 0; a < dv; ++a) VB[i * dv + a] = v[a] * beta;
        for (int64_t a = 0; a < dk; ++a) KB[i * dk + a] = K[i * dk + a] * beta;
        run += in.g[t * nv + h];
        cum[i] = static_cast<float>(run);
      }
      // pairwise decay exp(cum_i − cum_j) for j ≤ i; ut_system and intra-chunk attention
      for (int64_t i = 0; i < c; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          const float d = torch_order::exp(cum[i] - cum[j]);
          P[i * C + j] = d;
          A[i * C + j] = torch_order::gemm_dot(&KB[i * dk], 1, &K[j * dk], 1, dk) * d;  // ut_system
        }
      for (int64_t i = 0; i < c; ++i) {
        const float e = torch_order::exp(cum[i]);
        for (int64_t a = 0; a < dk; ++a) DKB[i * dk + a] = KB[i * dk + a] * e;  // decayed_k_beta
      }
      trsm_unit_lower(A.data(), C, c, VB.data(), dv, NV.data());   // new_values
      trsm_unit_lower(A.data(), C, c, DKB.data(), dk, KC.data());  // k_cumdecay
      const float last = cum[c - 1];
      for (int64_t i = 0; i < c; ++i) {
        const float ek = torch_order::exp(last - cum[i]);
        for (int64_t a = 0; a < dk; ++a) KT[i * dk + a] = K[i * dk + a] * ek;  // key · exp(cum_last − cum)
        // v_new = new_values − k_cumdecay @ S
        for (int64_t b = 0; b < dv; ++b)
          Vn[i * dv + b] = NV[i * dv + b] - torch_order::gemm_dot(&KC[i * dk], 1, S + b, dv, dk);
      }
      // out = (query·exp(cum)) @ S + intra @ v_new   (intra_ij = (q_i·k_j)·decay_ij, j ≤ i)
      for (int64_t i = 0; i < c; ++i) {
        const float eq = torch_order::exp(cum[i]);
        std::vector<float> qe(static_cast<size_t>(dk)), att(static_cast<size_t>(C), 0.0f);
        for (int64_t a = 0; a < dk; ++a) qe[a] = Q[i * dk + a] * eq;
        for (int64_t j = 0; j <= i; ++j) att[j] = torch_order::gemm_dot(&Q[i * dk], 1, &K[j * dk], 1, dk) * P[i * C + j];
        float* dst = out + (c0 + i) * nv * dv + h * dv;
        for (int64_t b = 0; b < dv; ++b) {
          const float inter = torch_order::gemm_dot(qe.data(), 1, S + b, dv, dk);
          const float intra = torch_order::gemm_dot(att.data(), 1, &Vn[b], dv, i + 1);
          dst[b] = inter + intra;
        }
      }
      // S ← S · exp(cum_last) + key_decayedᵀ @ v_new
      const float cd = torch_order::exp(last);
      for (int64_t a = 0; a < dk; ++a)
        for (int64_t b = 0; b < dv; ++b)
          Snew[a * dv + b] = S[a * dv + b] * cd + torch_order::gemm_dot(&KT[a], dk, &Vn[b], dv, c);
      std::copy(Snew.begin(), Snew.end(), S);
    }
  }
}

void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  // Qwen3_5RMSNormGated in fp32: w · (x · rsqrt(x.pow(2).mean(-1) + eps)) · silu(z)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    const float mean = torch_order::row_sum_squares(xr, dim) / static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < dim; ++i)
      yr[i] = (w[i] * (xr[i] * inv)) * torch_order::silu(zr[i], torch_order::aten_vectorized(r * dim + i, rows * dim, rows * dim));
  }
}

}  // namespace stave::ref
