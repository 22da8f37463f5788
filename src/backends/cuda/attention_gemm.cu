// Causal GQA attention (ref::attention_causal semantics) as two cuBLAS products per chunk of
// queries: S = scale · q·kᵀ over the keys the chunk can see, a causal softmax in place, then
// P·v. Fast precision runs in fp32 (SGEMM, no TF32); exact precision in fp64 (DGEMM, inputs
// widened exactly), as the exact linear layers do. The score buffer is bounded: queries are
// taken in chunks sized to a byte budget, so a long state never needs an L×L matrix at once.
// Also where fast attention picks this form or a flash kernel (attention_flash.cu, attention_flash_bf16.cu).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cuda/attention_flash_bf16.h"
#include "backends/cuda/device_ops.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda {

AttentionKernel attention_kernel_from_env() {
  return env_choice<AttentionKernel>("STAVE_CUDA_ATTENTION", {{"auto", AttentionKernel::kAuto},
                                                                {"flash", AttentionKernel::kFlash},
                                                                {"gemm", AttentionKernel::kGemm},
                                                                {"bf16", AttentionKernel::kFlashBf16}});
}

namespace dev {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }

template <class T>
__device__ T block_reduce(T v, bool is_max, T* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? (other > v ? other : v) : v + other;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    T w = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : (is_max ? T(-INFINITY) : T(0));
    for (int o = 16; o > 0; o >>= 1) {
      const T other = __shfl_xor_sync(0xffffffffu, w, o);
      w = is_max ? (other > w ? other : w) : w + other;
    }
    if (threadIdx.x == 0) red[0] = w;
  }
  __syncthreads();
  const T out = red[0];
  __syncthreads();
  return out;
}

// One block per score row: row r = head · rows + i holds the scores of query i0 + i, which sees
// keys 0 .. first_valid + step·i − 1 (step 1: causal; step 0: every row sees first_valid keys);
// later keys get probability 0. As the reference: max, exp, sum, × 1/sum.
template <class T>
__global__ void masked_softmax_kernel(T* s, int64_t rows, int64_t n_keys, int64_t first_valid, int64_t step) {
  __shared__ T red[32];
  const int64_t r = blockIdx.x;
  const int64_t valid = first_valid + step * (r % rows);
  T* row = s + r * n_keys;
  T m = T(-INFINITY);
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) m = row[j] > m ? row[j] : m;
  m = block_reduce<T>(m, true, red);
  T sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    const T e = exp_of(row[j] - m);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce<T>(sum, false, red);
  const T inv = T(1) / sum;
  for (int64_t j = threadIdx.x; j < n_keys; j += blockDim.x) row[j] = j < valid ? row[j] * inv : T(0);
}

__global__ void widen_kernel(const float* x, int64_t n, double* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i];
}

__global__ void narrow_kernel(const double* x, int64_t n, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(x[i]);
}

cublasStatus_t gemm_strided(cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, const float* alpha,
                            const float* A, int lda, long long sa, const float* B, int ldb, long long sb,
                            const float* beta, float* C, int ldc, long long sc, int batch) {
  return cublasSgemmStridedBatched(h, ta, CUBLAS_OP_N, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                   batch);
}
cublasStatus_t gemm_strided(cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, const double* alpha,
                            const double* A, int lda, long long sa, const double* B, int ldb, long long sb,
                            const double* beta, double* C, int ldc, long long sc, int batch) {
  return cublasDgemmStridedBatched(h, ta, CUBLAS_OP_N, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                   batch);
}

// q [tokens, nq·d], out [tokens, nq·d], all T on the device; `scores` is grown to the chunk's
// size. Causal (n_keys < 0): k/v [q_pos0 + tokens, nkv·d], query i at position q_pos0 + i.
// Full (n_keys > 0): k/v [n_keys, nkv·d], every query over all of them (q_pos0 unused).
template <class T>
void attend(GpuContext& ctx, const AttentionShape& shape, const T* q, int64_t tokens, int64_t q_pos0, const T* k,
            const T* v, T* out, size_t max_score_bytes, DeviceBuffer& scores, int64_t n_keys = -1) {
  const bool causal = n_keys < 0;
  if (!causal) q_pos0 = 0;
  const int64_t d = shape.head_dim, nq = shape.n_q_heads, nkv = shape.n_kv_heads;
  const int64_t group = nq / nkv, kvw = nkv * d;
  const int64_t per_query = nq * (causal ? q_pos0 + tokens : n_keys) * static_cast<int64_t>(sizeof(T));
  const int64_t chunk = std::clamp<int64_t>(static_cast<int64_t>(max_score_bytes) / per_query, 1, tokens);
  scores.reserve(static_cast<size_t>(chunk * per_query));
  T* S = scores.as<T>();
  cublasHandle_t h = ctx.blas();
  const T scale = static_cast<T>(shape.scale), one = 1, zero = 0;
  for (int64_t i0 = 0; i0 < tokens; i0 += chunk) {
    const int64_t rows = std::min(chunk, tokens - i0);
    const int64_t keys = causal ? q_pos0 + i0 + rows : n_keys;  // what the chunk's last query sees
    for (int64_t g = 0; g < nkv; ++g)
      // Column-major: Sᵀ_h [keys, rows] = K_g [keys, d] · Q_hᵀ; one batch entry per q head of
      // the group, the group's keys shared (stride 0).
      STAVE_CUBLAS_CHECK(gemm_strided(h, CUBLAS_OP_T, static_cast<int>(keys), static_cast<int>(rows),
                                      static_cast<int>(d), &scale, k + g * d, static_cast<int>(kvw), 0,
                                      q + (i0 * nq + g * group) * d, static_cast<int>(nq * d), d, &zero,
                                      S + g * group * rows * keys, static_cast<int>(keys), rows * keys,
                                      static_cast<int>(group)));
    masked_softmax_kernel<T><<<static_cast<unsigned>(nq * rows), kThreads, 0, ctx.stream()>>>(
        S, rows, keys, causal ? q_pos0 + i0 + 1 : keys, causal ? 1 : 0);
    STAVE_CUDA_LAUNCHED();
    for (int64_t g = 0; g < nkv; ++g)
      // Oᵀ_h [d, rows] = V_g [d, keys] (column-major view of v) · Pᵀ_h [keys, rows].
      STAVE_CUBLAS_CHECK(gemm_strided(h, CUBLAS_OP_N, static_cast<int>(d), static_cast<int>(rows),
                                      static_cast<int>(keys), &one, v + g * d, static_cast<int>(kvw), 0,
                                      S + g * group * rows * keys, static_cast<int>(keys), rows * keys, &zero,
                                      out + (i0 * nq + g * group) * d, static_cast<int>(nq * d), d,
                                      static_cast<int>(group)));
  }
}

bool use_flash(const GpuContext& ctx, const AttentionShape& shape, int64_t queries) {
  switch (ctx.attention_kernel()) {
    case AttentionKernel::kFlash: return true;
    case AttentionKernel::kGemm: return false;
    case AttentionKernel::kAuto:
    case AttentionKernel::kFlashBf16: break;
  }
  return flash_attention_pays(shape, queries);
}

// Causal only: pinned, every token count; automatic, from kFlashBf16MinTokens queries on.
bool use_flash_bf16(const GpuContext& ctx, int64_t queries) {
  switch (ctx.attention_kernel()) {
    case AttentionKernel::kFlashBf16: return true;
    case AttentionKernel::kAuto: return queries >= kFlashBf16MinTokens;
    case AttentionKernel::kFlash:
    case AttentionKernel::kGemm: return false;
  }
  return false;
}

}  // namespace

void attention_causal(GpuContext& ctx, const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                      const float* k, const float* v, float* out, size_t max_score_bytes) {
  if (tokens <= 0) return;
  const int64_t d = shape.head_dim, nq = shape.n_q_heads, nkv = shape.n_kv_heads;
  if (d <= 0 || nkv <= 0 || nq % nkv != 0)
    throw Error(ErrorKind::kInvalidModel, "attention: n_q_heads must be a multiple of n_kv_heads");
  if (!ctx.exact()) {
    if (use_flash_bf16(ctx, tokens) && flash_attention_bf16_supports(shape, q, k, v, out, q_pos0 + tokens)) {
      flash_attention_bf16(ctx.stream(), shape, q, tokens, q_pos0, k, v, out);
      return;
    }
    if (use_flash(ctx, shape, tokens) && flash_attention_supports(shape, q, k, v, out, q_pos0 + tokens))
      flash_attention(ctx.stream(), shape, q, tokens, q_pos0, k, v, q_pos0 + tokens, /*causal=*/true, out);
    else
      attend<float>(ctx, shape, q, tokens, q_pos0, k, v, out, max_score_bytes, ctx.scratch_scores());
    return;
  }
  // Exact: everything widened to double once (q, k, v, out side by side in one scratch).
  const int64_t nqd = tokens * nq * d, nkd = (q_pos0 + tokens) * nkv * d;
  DeviceBuffer& wide = ctx.scratch_wide();
  wide.reserve(static_cast<size_t>(2 * nqd + 2 * nkd) * sizeof(double));
  double* qd = wide.as<double>();
  double* kd = qd + nqd;
  double* vd = kd + nkd;
  double* od = vd + nkd;
  cudaStream_t s = ctx.stream();
  widen_kernel<<<blocks_for(nqd), kThreads, 0, s>>>(q, nqd, qd);
  widen_kernel<<<blocks_for(nkd), kThreads, 0, s>>>(k, nkd, kd);
  widen_kernel<<<blocks_for(nkd), kThreads, 0, s>>>(v, nkd, vd);
  STAVE_CUDA_LAUNCHED();
  attend<double>(ctx, shape, qd, tokens, q_pos0, kd, vd, od, max_score_bytes, ctx.scratch_scores());
  narrow_kernel<<<blocks_for(nqd), kThreads, 0, s>>>(od, nqd, out);
  STAVE_CUDA_LAUNCHED();
}

void attention_full(GpuContext& ctx, const AttentionShape& shape, const float* q, int64_t rows, const float* k,
                    const float* v, int64_t n_keys, float* out, size_t max_score_bytes) {
  if (rows <= 0) return;
  const int64_t d = shape.head_dim, nq = shape.n_q_heads, nkv = shape.n_kv_heads;
  if (d <= 0 || nkv <= 0 || nq % nkv != 0 || n_keys <= 0)
    throw Error(ErrorKind::kInvalidModel, "attention: n_q_heads must be a multiple of n_kv_heads, keys non-empty");
  if (ctx.exact()) throw Error(ErrorKind::kInternal, "attention_full: fast precision only");
  if (use_flash(ctx, shape, rows) && flash_attention_supports(shape, q, k, v, out, n_keys)) {
    flash_attention(ctx.stream(), shape, q, rows, 0, k, v, n_keys, /*causal=*/false, out);
    return;
  }
  attend<float>(ctx, shape, q, rows, 0, k, v, out, max_score_bytes, ctx.scratch_scores(), n_keys);
}

bool attention_folded_pays(int64_t heads, int64_t E, int64_t rows, int64_t L, size_t max_score_bytes) {
  return heads > 0 && E % heads == 0 && rows > 0 && L > 0 && heads * rows < E &&
         heads * rows * L * static_cast<int64_t>(sizeof(float)) <= static_cast<int64_t>(max_score_bytes);
}

// Row-major X [r, c] is column-major Xᵀ with leading dimension c: every product below is written
// in cuBLAS's column-major terms on those transposed views.
void attention_folded(GpuContext& ctx, int64_t heads, int64_t E, const float* q, int64_t rows, const float* memory,
                      int64_t L, const float* wk, const float* wv, const float* bv, float scale, float* qk_scratch,
                      float* scores, float* mixed, float* context) {
  if (rows <= 0) return;
  if (ctx.exact()) throw Error(ErrorKind::kInternal, "attention_folded: fast precision only");
  if (heads <= 0 || E % heads != 0 || L <= 0)
    throw Error(ErrorKind::kInvalidModel, "attention_folded: width " + std::to_string(E) + " does not split into " +
                                              std::to_string(heads) + " heads over " + std::to_string(L) + " rows");
  const int64_t d = E / heads, hr = heads * rows;
  cublasHandle_t h = ctx.blas();
  const float one = 1.0f, zero = 0.0f;
  const int e = static_cast<int>(E), n_rows = static_cast<int>(rows), dd = static_cast<int>(d);
  // q'_hᵀ [E, rows] = Wk_hᵀ [E, d] · q_hᵀ [d, rows] (Wk_h: rows h·d … of wk), into
  // qk_scratch [heads][rows][E].
  STAVE_CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, e, n_rows, dd, &scale, wk, e, d * E, q, e,
                                               d, &zero, qk_scratch, e, rows * E, static_cast<int>(heads)));
  // Scoresᵀ [L, heads·rows] = M [L, E] · q'ᵀ: scores [heads·rows][L].
  STAVE_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(L), static_cast<int>(hr), e, &one,
                                 memory, e, qk_scratch, e, &zero, scores, static_cast<int>(L)));
  masked_softmax_kernel<float><<<static_cast<unsigned>(hr), kThreads, 0, ctx.stream()>>>(scores, 1, L, L, 0);
  STAVE_CUDA_LAUNCHED();
  // mixedᵀ [E, heads·rows] = Mᵀ [E, L] · Pᵀ [L, heads·rows]: mixed [heads][rows][E] = P · M.
  STAVE_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, e, static_cast<int>(hr), static_cast<int>(L), &one,
                                 memory, e, scores, static_cast<int>(L), &zero, mixed, e));
  // context_hᵀ [d, rows] = Wv_h [d, E] · mixed_hᵀ [E, rows], into columns h·d … of context [rows, E].
  STAVE_CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, dd, n_rows, e, &one, wv, e, d * E, mixed, e,
                                               rows * E, &zero, context, e, d, static_cast<int>(heads)));
  if (bv) add_bias(context, rows, E, bv, ctx.stream());
}

}  // namespace dev
}  // namespace stave::cuda
