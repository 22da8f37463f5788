// The leaf kernels of op_kernels.h, written once as plain loops that the compiler vectorizes
// with whatever ISA flags the including file is built with (`#pragma omp simd` marks the loops
// and reductions it may reorder). Included by op_kernels_generic.cpp, avx2/op_kernels_avx2.cpp
// and avx512/op_kernels_avx512.cpp, each inside its own namespace (STAVE_OP_KERNELS_NS), so the
// three copies never meet at link time. No standard-library templates here (see op_kernels.h).
//
// Not a normal header: no include guard on purpose.
// <cmath> for INFINITY only: math calls are __builtin_*, so no inline std:: function is
// compiled here under ISA flags (op_kernels.h says why).
#include <cmath>
#include <cstdint>

#include "backends/cpu/op_kernels.h"

// Lets the compiler turn the clamps of fast_exp into vector min/max (IEEE exception flags are
// never read in stave); without it no loop that calls fast_exp vectorizes. (GCC only: clang,
// which builds the fuzz targets, has no such pragma.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

namespace stave::cpu::STAVE_OP_KERNELS_NS {
namespace {

inline float min_f(float a, float b) { return a < b ? a : b; }
inline float max_f(float a, float b) { return a > b ? a : b; }
inline int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }

// exp(x) for fp32: Cephes' range reduction and degree-6 polynomial (≤ 2 ulp), clamped to the
// normal range (exp(x < −87.3) gives ~1e-38 instead of a denormal or 0; every use adds or
// multiplies it away). Branch-free so loops over it vectorize.
inline float fast_exp(float x) {
  x = min_f(max_f(x, -87.3f), 88.7f);
  // n = round(x·log2 e): adding and removing 1.5·2²³ rounds to an integer (floorf would not vectorize).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2ⁿ from its exponent bits; n + 127 lands in the low mantissa bits of 1.5·2²³ + n + 127.
  const int32_t bits = (__builtin_bit_cast(int32_t, n + (12582912.0f + 127.0f)) - 0x4B400000) << 23;
  return y * __builtin_bit_cast(float, bits);
}

inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

float sum_squares(const float* x, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// y[0..n) += a · x[0..n)
inline void axpy(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Σx² in double: the norms' only reduction, cheap next to the row it scales, and with it the
// fast rms_norm rounds like the reference (an MXFP4 layer's input quantization then sees the
// same values; W4A4 rounding codes are where fp32 noise would show most).
double sum_squares_f64(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void rms_norm_rows(const float* x, int64_t rows, int64_t dim, const float* w, float w_offset, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float inv = 1.0f / __builtin_sqrtf(static_cast<float>(sum_squares_f64(xr, dim) / static_cast<double>(dim)) + eps);
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * (w[i] + w_offset);
  }
}

void gated_rms_norm_rows(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                         float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* zr = z + r * dim;
    float* yr = y + r * dim;
    const float inv = static_cast<float>(1.0 / __builtin_sqrt(sum_squares_f64(xr, dim) / static_cast<double>(dim) + eps));
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv) * (zr[i] * fast_sigmoid(zr[i]));
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * fast_sigmoid(gate[i]) * up[i];
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * fast_sigmoid(gate[i]);
}

void gelu_tanh(float* x, int64_t n) {
  // tanh(u) = 1 − 2/(exp(2u) + 1), so 0.5·(1 + tanh(u)) = sigmoid(2u).
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = 0.79788456080286535588f * (v + 0.044715f * v * v * v);
    x[i] = v * fast_sigmoid(2.0f * u);
  }
}

void conv1d_silu_tokens(const float* x, int64_t t0, int64_t t1, int64_t channels, const float* wt, int64_t kernel,
                        const float* history, float* y) {
  const int64_t H = kernel - 1;
  for (int64_t t = t0; t < t1; ++t) {
    float* yr = y + t * channels;
    for (int64_t c = 0; c < channels; ++c) yr[c] = 0.0f;
    for (int64_t j = 0; j < kernel; ++j) {
      const int64_t s = t - H + j;
      const float* in = s < 0 ? history + (H + s) * channels : x + s * channels;
      const float* w = wt + j * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) yr[c] += w[c] * in[c];
    }
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) yr[c] = yr[c] * fast_sigmoid(yr[c]);
  }
}

void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
          const float* sin) {
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

// HF l2norm: x · rsqrt(Σx² + 1e-6) · post_scale.
void l2_normalize(const float* x, int64_t d, float post_scale, float* y) {
  const float inv = post_scale / __builtin_sqrtf(sum_squares(x, d) + 1e-6f);
#pragma omp simd
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv;
}

// ---- Register-blocked products (attention and the delta rule's chunk matrices) ----
// GCC vector extensions of the including file's widest vector: each loaded B vector feeds
// kRowBlock rows and each broadcast A value feeds kColVecs vectors, with the kRowBlock × kColVecs
// accumulators in registers for the whole reduction (the plain axpy loops above load and store
// their destination once per multiply-add).
// Tile shapes measured on Zen 4 (the fastest of 4–8 rows × 1–4 vectors for attention at
// 1024 tokens; the delta rule was indifferent): 4 × 4 zmm of 32 registers, 6 × 2 ymm and 4 × 3
// xmm of 16.
#if defined(__AVX512F__)
#define STAVE_VEC_FLOATS 16
constexpr int kRowBlock = 4;  // rows of A (and C) per tile
constexpr int kColVecs = 4;   // vectors of B (and C) per tile
#elif defined(__AVX__)
#define STAVE_VEC_FLOATS 8
constexpr int kRowBlock = 6;
constexpr int kColVecs = 2;
#else
#define STAVE_VEC_FLOATS 4
constexpr int kRowBlock = 4;
constexpr int kColVecs = 3;
#endif
typedef float vfloat __attribute__((vector_size(STAVE_VEC_FLOATS * 4)));
constexpr int64_t kVec = STAVE_VEC_FLOATS;
#undef STAVE_VEC_FLOATS

inline vfloat load_v(const float* p) {
  vfloat v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store_v(float* p, vfloat v) { __builtin_memcpy(p, &v, sizeof v); }
// n rounded up to whole vectors, at most cap (a buffer's row length): products over columns
// past n cost nothing extra when they fill a vector, where a scalar tail column costs a
// strided pass over K.
inline int64_t vec_ceil(int64_t n, int64_t cap) { return min_i(cap, (n + kVec - 1) / kVec * kVec); }

// C[MR × NV·kVec] (+)= A[MR × K] · B[K × NV·kVec], all row-major with leading dimensions.
template <int MR, int NV>
inline void gemm_tile(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                      bool accumulate) {
  vfloat c[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? load_v(C + r * ldc + v * kVec) : vfloat{};
  for (int64_t k = 0; k < K; ++k) {
    vfloat b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = load_v(B + k * ldb + v * kVec);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const vfloat a = A[r * lda + k] - vfloat{};  // a broadcast (x − 0 is x, even for −0)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) c[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store_v(C + r * ldc + v * kVec, c[r][v]);
}

// Columns [0, N) of MR rows: full tiles, then single vectors, then scalar tail columns.
template <int MR>
void gemm_rows(int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
               bool accumulate) {
  int64_t j = 0;
  for (; j + kColVecs * kVec <= N; j += kColVecs * kVec)
    gemm_tile<MR, kColVecs>(K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  for (; j + kVec <= N; j += kVec) gemm_tile<MR, 1>(K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  for (; j < N; ++j)
    for (int r = 0; r < MR; ++r) {
      float s = accumulate ? C[r * ldc + j] : 0.0f;
      for (int64_t k = 0; k < K; ++k) s += A[r * lda + k] * B[k * ldb + j];
      C[r * ldc + j] = s;
    }
}

// C[M × N] (+)= A[M × K] · B[K × N] (row-major, leading dimensions lda/ldb/ldc; C must not
// overlap A or B). Each C element sums its K products in order k = 0, 1, … (as the loops it replaces).
void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
          int64_t ldc, bool accumulate) {
  int64_t i = 0;
  for (; i + kRowBlock <= M; i += kRowBlock)
    gemm_rows<kRowBlock>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, accumulate);
  if (kRowBlock > 4 && i + 4 <= M) {
    gemm_rows<4>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, accumulate);
    i += 4;
  }
  for (; i + 2 <= M; i += 2) gemm_rows<2>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, accumulate);
  if (i < M) gemm_rows<1>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, accumulate);
}

// The chunked delta rule for one v head (the algorithm of ref::gated_delta_rule_chunked in fp32).
// Per chunk of c tokens: O(c²(d_k + d_v) + 3·c·d_k·d_v) multiply-adds, every product of more than
// one row through gemm() (register tiles): K Kᵀ and Q Kᵀ, the forward substitution by blocks
// of kRowBlock rows, W S, Q S, P V' and the state update. Each output element sums its products
// in the same order as the row-by-row form, so the rounding is that form's.
void gated_delta_head(const GatedDeltaDims& dims, const GatedDeltaInput& in, int64_t h, int64_t chunk,
                      float* S, float* out, float* scratch) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads, C = chunk;
  const int64_t kh = h / (nv / dims.n_k_heads);
  const float q_scale = 1.0f / __builtin_sqrtf(static_cast<float>(dk));
  const int64_t ldx = dv + dk;  // X rows: [v part | k part]
  const int64_t ldo = nv * dv;  // output rows
  float* Q = scratch;           // [C, dk]  q_i/√d_k, then · e^{γ_i}
  float* K = Q + C * dk;        // [C, dk]
  float* Kt = K + C * dk;       // [dk, C]  then · e^{γ_last − γ_j}
  float* X = Kt + dk * C;       // [C, dv + dk]: [βV | −β e^γ K], solved to [U | −W], then [V' | −W]
  float* A = X + C * ldx;       // [C, C]   −L_ij = −β_i (k_i·k_j) Γ_ij, j < i
  float* P = A + C * C;         // [C, C]   (q_i·k_j) Γ_ij, j ≤ i (0 above the diagonal)
  float* gam = P + C * C;       // [C]
  float* eg = gam + C;          // [C]      e^{γ_i}
  for (int64_t c0 = 0; c0 < in.tokens; c0 += C) {
    const int64_t c = min_i(C, in.tokens - c0);
    float* dst0 = out + c0 * ldo + h * dv;
    float cum = 0.0f;
    for (int64_t i = 0; i < c; ++i) {
      const int64_t t = c0 + i;
      l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, Q + i * dk);
      l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0f, K + i * dk);
      cum += in.g[t * nv + h];
      gam[i] = cum;
      eg[i] = fast_exp(cum);
      const float b = in.beta[t * nv + h];
      const float* v = in.v + t * in.stride + h * dv;
      float* x = X + i * ldx;
#pragma omp simd
      for (int64_t a = 0; a < dv; ++a) x[a] = v[a] * b;
#pragma omp simd
      for (int64_t a = 0; a < dk; ++a) x[dv + a] = -(K[i * dk + a] * (b * eg[i]));
    }
    for (int64_t j = 0; j < c; ++j)
      for (int64_t a = 0; a < dk; ++a) Kt[a * C + j] = K[j * dk + a];
    for (int64_t a = 0; a < dk; ++a)  // a short last chunk: columns past c enter only unread products
      for (int64_t j = c; j < C; ++j) Kt[a * C + j] = 0.0f;
    // K Kᵀ and Q Kᵀ up to each row block's diagonal, then decays and masks.
    for (int64_t i0 = 0; i0 < c; i0 += kRowBlock) {
      const int64_t mr = min_i(kRowBlock, c - i0);
      const int64_t w = vec_ceil(i0 + mr, C);  // past the diagonal only to a whole vector
      gemm(mr, w, dk, K + i0 * dk, dk, Kt, C, A + i0 * C, C, false);
      gemm(mr, w, dk, Q + i0 * dk, dk, Kt, C, P + i0 * C, C, false);
      for (int64_t i = i0; i < i0 + mr; ++i) {
        float* ar = A + i * C;
        float* pr = P + i * C;
        const float b = in.beta[(c0 + i) * nv + h];
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) {
          const float decay = fast_exp(gam[i] - gam[j]);
          ar[j] = -(ar[j] * (b * decay));
          pr[j] *= decay;
        }
        for (int64_t j = i + 1; j < i0 + mr; ++j) pr[j] = 0.0f;
      }
    }
    // Forward substitution (I + L) [U | −W] = [βV | −β e^γ K]: a block's rows minus the solved
    // rows above it (one product), then the triangle inside the block.
    for (int64_t i0 = 0; i0 < c; i0 += kRowBlock) {
      const int64_t mr = min_i(kRowBlock, c - i0);
      if (i0 > 0) gemm(mr, ldx, i0, A + i0 * C, C, X, ldx, X + i0 * ldx, ldx, true);
      for (int64_t i = i0 + 1; i < i0 + mr; ++i)
        for (int64_t j = i0; j < i; ++j) axpy(A[i * C + j], X + j * ldx, X + i * ldx, ldx);
    }
    // V' = U − W S, and the inter-chunk part of the output e^{γ_i} q_iᵀ S (S entering the chunk).
    gemm(c, dv, dk, X + dv, ldx, S, dv, X, ldx, true);
    for (int64_t i = 0; i < c; ++i) {
      float* q = Q + i * dk;
      const float e = eg[i];
#pragma omp simd
      for (int64_t a = 0; a < dk; ++a) q[a] *= e;
    }
    gemm(c, dv, dk, Q, dk, S, dv, dst0, ldo, false);
    // Intra-chunk part: O_i += Σ_{j≤i} P_ij V'_j.
    for (int64_t i0 = 0; i0 < c; i0 += kRowBlock) {
      const int64_t mr = min_i(kRowBlock, c - i0);
      gemm(mr, dv, i0 + mr, P + i0 * C, C, X, ldx, dst0 + i0 * ldo, ldo, true);
    }
    // S ← e^{γ_last} S + Σ_j (k_j e^{γ_last − γ_j}) V'_jᵀ
    const float glast = gam[c - 1];
    const float e_last = eg[c - 1];
    for (int64_t j = 0; j < c; ++j) gam[j] = fast_exp(glast - gam[j]);
    for (int64_t a = 0; a < dk; ++a) {
      float* s = S + a * dv;
#pragma omp simd
      for (int64_t b = 0; b < dv; ++b) s[b] *= e_last;
      float* kt = Kt + a * C;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) kt[j] *= gam[j];
    }
    gemm(dk, dv, c, Kt, C, X, ldx, S, dv, true);
  }
}

void gated_delta_recurrent_head(const GatedDeltaDims& dims, const GatedDeltaInput& in, int64_t h, float* S,
                                float* out, float* scratch) {
  const int64_t dk = dims.d_k, dv = dims.d_v, nv = dims.n_v_heads;
  const int64_t kh = h / (nv / dims.n_k_heads);
  const float q_scale = 1.0f / __builtin_sqrtf(static_cast<float>(dk));
  float* q = scratch;
  float* k = q + dk;
  float* e = k + dk;
  for (int64_t t = 0; t < in.tokens; ++t) {
    l2_normalize(in.q + t * in.stride + kh * dk, dk, q_scale, q);
    l2_normalize(in.k + t * in.stride + kh * dk, dk, 1.0f, k);
    const float* v = in.v + t * in.stride + h * dv;
    const float alpha = fast_exp(in.g[t * nv + h]);
    const float beta = in.beta[t * nv + h];
    for (int64_t b = 0; b < dv; ++b) e[b] = 0.0f;
    for (int64_t a = 0; a < dk; ++a) {  // S ← αS; e = Sᵀk
      float* s = S + a * dv;
      const float ka = k[a];
#pragma omp simd
      for (int64_t b = 0; b < dv; ++b) {
        s[b] *= alpha;
        e[b] += ka * s[b];
      }
    }
#pragma omp simd
    for (int64_t b = 0; b < dv; ++b) e[b] = (v[b] - e[b]) * beta;
    float* o = out + t * nv * dv + h * dv;
    for (int64_t b = 0; b < dv; ++b) o[b] = 0.0f;
    for (int64_t a = 0; a < dk; ++a) {  // S += k eᵀ; o = Sᵀq
      float* s = S + a * dv;
      const float ka = k[a], qa = q[a];
#pragma omp simd
      for (int64_t b = 0; b < dv; ++b) {
        s[b] += ka * e[b];
        o[b] += qa * s[b];
      }
    }
  }
}

// Keys [0, n) of one tile (key j at k + j·kv_stride, d floats) transposed to kt[d, kAttentionTile],
// columns past n zero (they enter only scores nobody reads).
void attention_key_tile(const float* k, int64_t kv_stride, int64_t n, int64_t d, float* kt) {
  const int64_t T = kAttentionTile;
  for (int64_t j = 0; j < n; ++j) {
    const float* kr = k + j * kv_stride;
    for (int64_t i = 0; i < d; ++i) kt[i * T + j] = kr[i];
  }
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = n; j < T; ++j) kt[i * T + j] = 0.0f;
}

// Flash-style attention for a block of rows sharing one kv head: keys in tiles of
// kAttentionTile (transposed by the caller once for all blocks, or here per tile), online
// softmax per row. Both products
// of a tile (scores Q Kᵀ and the weighted sum P V) run through gemm() on groups of kRowBlock
// rows, so each loaded key or value vector serves kRowBlock rows (the heads of one GQA group
// when the caller orders rows token-major).
void attention_rows(const AttentionRows& a, float* scratch) {
  const int64_t R = a.rows, d = a.head_dim, T = kAttentionTile;
  float* score = scratch;          // [R, T]
  float* acc = score + R * T;      // [R, d]
  float* run_max = acc + R * d;    // [R]
  float* run_sum = run_max + R;    // [R]
  float* kt_own = run_sum + R;     // [d, T]  (unused when the caller passes k_tiles)
  float* qs = kt_own + d * T;      // [R, d]  q · scale
  int64_t max_keys = 0;
  for (int64_t r = 0; r < R; ++r) {
    max_keys = a.n_keys[r] > max_keys ? a.n_keys[r] : max_keys;
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
    const float* q = a.q_rows[r];
    float* qr = qs + r * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) {
      acc[r * d + i] = 0.0f;
      qr[i] = q[i] * a.scale;
    }
  }
  for (int64_t j0 = 0; j0 < max_keys; j0 += T) {
    const int64_t n = min_i(T, max_keys - j0);
    const float* kt = a.k_tiles ? a.k_tiles + (j0 / T) * d * T : kt_own;
    if (!a.k_tiles) attention_key_tile(a.k + j0 * a.kv_stride, a.kv_stride, n, d, kt_own);
    for (int64_t r0 = 0; r0 < R; r0 += kRowBlock) {
      const int64_t mr = min_i(kRowBlock, R - r0);
      int64_t gn = 0;  // keys of this tile that some row of the group attends
      for (int64_t r = r0; r < r0 + mr; ++r) gn = max_i(gn, min_i(n, a.n_keys[r] - j0));
      if (gn <= 0) continue;
      gemm(mr, vec_ceil(gn, T), d, qs + r0 * d, d, kt, T, score + r0 * T, T, false);
      for (int64_t r = r0; r < r0 + mr; ++r) {
        const int64_t nk = min_i(n, a.n_keys[r] - j0);
        float* s = score + r * T;
        if (nk <= 0) {  // this row's keys ended before the tile: weight 0, state untouched
          for (int64_t j = 0; j < gn; ++j) s[j] = 0.0f;
          continue;
        }
        float m = run_max[r];
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < nk; ++j) m = max_f(m, s[j]);
        const float correction = fast_exp(run_max[r] - m);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < nk; ++j) {
          s[j] = fast_exp(s[j] - m);
          sum += s[j];
        }
        for (int64_t j = nk; j < gn; ++j) s[j] = 0.0f;
        run_sum[r] = run_sum[r] * correction + sum;
        run_max[r] = m;
        if (correction != 1.0f) {  // exactly 1 when the running max did not move (most late tiles)
          float* ar = acc + r * d;
#pragma omp simd
          for (int64_t i = 0; i < d; ++i) ar[i] *= correction;
        }
      }
      gemm(mr, d, gn, score + r0 * T, T, a.v + j0 * a.kv_stride, a.kv_stride, acc + r0 * d, d, true);
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    const float inv = a.n_keys[r] > 0 ? 1.0f / run_sum[r] : 0.0f;
    float* o = a.out_rows[r];
    const float* ar = acc + r * d;
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) o[i] = ar[i] * inv;
  }
}

}  // namespace

const OpKernels& table() {
  static const OpKernels k = {STAVE_OP_KERNELS_ISA,
                              rms_norm_rows,
                              gated_rms_norm_rows,
                              silu_mul,
                              sigmoid_mul,
                              conv1d_silu_tokens,
                              rope,
                              gated_delta_head,
                              gated_delta_recurrent_head,
                              attention_rows,
                              attention_key_tile,
                              gelu_tanh};
  return k;
}

}  // namespace stave::cpu::STAVE_OP_KERNELS_NS
