#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <omp.h>

#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/flush_denormals.h"
#include "backends/cpu/op_kernels.h"

namespace stave::cpu {
namespace {

// Below this many float operations an op runs on the calling thread: waking a team costs
// tens of microseconds, more than the whole op on the small fixture models.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

// Calls fn(begin, end) over [0, n) in blocks of `grain`, in parallel when work is large, with
// denormals flushed on every thread (flush_denormals.h).
template <class Fn>
void parallel_blocks(int64_t n, int64_t grain, int64_t work, Fn fn) {
  const int64_t blocks = (n + grain - 1) / grain;
#pragma omp parallel if (work >= kMinParallelWork && blocks > 1)
  {
    const FlushDenormals ftz;
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) fn(b * grain, std::min(n, (b + 1) * grain));
  }
}

// Elements per block of the element-wise ops (a multiple of every vector width).
constexpr int64_t kElementGrain = 16384;

// Query tokens per attention block: the rows of a block (tokens × heads of one kv group) share
// each transposed key tile and each value tile.
constexpr int64_t kQueryBlock = 32;

// Query tokens per block for `rows` query rows over n_kv heads: kQueryBlock, or fewer (down to
// 4, one register tile of rows per GQA head) when that would leave fewer than 4 blocks per
// thread to balance (short prompts, or many threads).
int64_t query_block(int64_t rows, int64_t n_kv) {
  const int64_t want_tasks = 4 * static_cast<int64_t>(omp_get_max_threads());
  const int64_t tokens = (rows * n_kv + want_tasks - 1) / want_tasks;
  return std::clamp<int64_t>(tokens, 4, kQueryBlock);
}

// The keys of an attention call: n_kv heads of `keys` rows (head h's key j at k + j·kv_stride + h·d).
struct AttentionKeys {
  const float* k = nullptr;
  int64_t kv_stride = 0, n_kv = 0, keys = 0, d = 0;
};

// Attention of a list of (kv head, query block) tasks; fill_rows fills the rows of one task and
// returns its kv head. With more than one task per kv head, each head's keys are transposed into
// tiles once (attention_key_tile, in parallel) and shared by its tasks instead of transposed by each.
template <class FillRows>
void attention_tasks(int64_t tasks, int64_t max_rows, const AttentionKeys& keys, int64_t work, FillRows fill_rows) {
  const OpKernels& k = op_kernels();
  const int64_t d = keys.d, T = kAttentionTile;
  const int64_t tiles = (keys.keys + T - 1) / T, head_floats = tiles * d * T;
  const bool pack = tasks > keys.n_kv;
  std::unique_ptr<float[]> k_tiles(pack ? new float[static_cast<size_t>(keys.n_kv * head_floats)] : nullptr);
#pragma omp parallel if (work >= kMinParallelWork && tasks > 1)
  {
    const FlushDenormals ftz;
    if (pack) {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < keys.n_kv * tiles; ++i) {
        const int64_t h = i / tiles, t = i % tiles;
        k.attention_key_tile(keys.k + t * T * keys.kv_stride + h * d, keys.kv_stride,
                             std::min(T, keys.keys - t * T), d, k_tiles.get() + h * head_floats + t * d * T);
      }
    }
    std::vector<const float*> q_rows(static_cast<size_t>(max_rows));
    std::vector<float*> out_rows(static_cast<size_t>(max_rows));
    std::vector<int64_t> n_keys(static_cast<size_t>(max_rows));
    std::vector<float> scratch(attention_scratch_floats(max_rows, d));
    AttentionRows a;
    a.q_rows = q_rows.data();
    a.out_rows = out_rows.data();
    a.n_keys = n_keys.data();
    a.head_dim = d;
    // Dynamic: causal blocks late in the sequence have many more keys than early ones.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t kvh = fill_rows(task, a, q_rows.data(), out_rows.data(), n_keys.data());
      a.k_tiles = pack ? k_tiles.get() + kvh * head_floats : nullptr;
      k.attention_rows(a, scratch.data());
    }
  }
}

// h[0..n) += y[0..n): one block of the residual add.
void add_block(float* h, const float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) h[i] += y[i];
}

}  // namespace

void CpuBackend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
  cpu::linear(w, x, M, y);
}

void CpuBackend::rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                        float* y) const {
  const OpKernels& k = op_kernels();
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(dim, 1));
  parallel_blocks(rows, grain, rows * dim * 4, [&](int64_t r0, int64_t r1) {
    k.rms_norm_rows(x + r0 * dim, r1 - r0, dim, w, 1.0f, eps, y + r0 * dim);
  });
}

// The residual adds and the query/gate split move tokens × hidden floats each: on the calling
// thread alone they were most of "norms+elementwise" on 16 cores (docs/benchmarks.md), so they
// run in blocks over the team like the other element-wise ops. Sums are the same in any order.
void CpuBackend::add_inplace(float* h, const float* y, int64_t n) const {
  parallel_blocks(n, kElementGrain, n * 4, [&](int64_t i0, int64_t i1) { add_block(h + i0, y + i0, i1 - i0); });
}

// Blocks of rows, each split by the base class's row loop.
void CpuBackend::split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const {
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(2 * d, 1));
  parallel_blocks(rows, grain, rows * d * 4, [&](int64_t r0, int64_t r1) {
    Backend::split_query_gate(qg + r0 * 2 * d, r1 - r0, d, q + r0 * d, gate + r0 * d);
  });
}

// h += y, then x = RMSNorm(h), one block of rows at a time while it is in cache: the same
// values as add_inplace followed by rms_norm_zero_centered.
void CpuBackend::add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                            float eps, float* x) const {
  const OpKernels& k = op_kernels();
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(dim, 1));
  parallel_blocks(rows, grain, rows * dim * 6, [&](int64_t r0, int64_t r1) {
    add_block(h + r0 * dim, y + r0 * dim, (r1 - r0) * dim);
    k.rms_norm_rows(h + r0 * dim, r1 - r0, dim, w, 1.0f, eps, x + r0 * dim);
  });
}

void CpuBackend::gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                                float* y) const {
  const OpKernels& k = op_kernels();
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(dim, 1));
  parallel_blocks(rows, grain, rows * dim * 20, [&](int64_t r0, int64_t r1) {
    k.gated_rms_norm_rows(x + r0 * dim, z + r0 * dim, r1 - r0, dim, w, eps, y + r0 * dim);
  });
}

void CpuBackend::silu_mul(const float* gate, const float* up, int64_t n, float* y) const {
  const OpKernels& k = op_kernels();
  parallel_blocks(n, kElementGrain, n * 20, [&](int64_t i0, int64_t i1) { k.silu_mul(gate + i0, up + i0, i1 - i0, y + i0); });
}

void CpuBackend::sigmoid_mul(float* x, const float* gate, int64_t n) const {
  const OpKernels& k = op_kernels();
  parallel_blocks(n, kElementGrain, n * 20, [&](int64_t i0, int64_t i1) { k.sigmoid_mul(x + i0, gate + i0, i1 - i0); });
}

void CpuBackend::gelu_tanh_inplace(float* x, int64_t n) const {
  const OpKernels& k = op_kernels();
  parallel_blocks(n, kElementGrain, n * 24, [&](int64_t i0, int64_t i1) { k.gelu_tanh(x + i0, i1 - i0); });
}

void CpuBackend::causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                    int64_t kernel, float* history, float* y) const {
  if (tokens <= 0) return;
  const OpKernels& k = op_kernels();
  std::vector<float> wt(static_cast<size_t>(kernel * channels));  // [kernel, channels]
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < kernel; ++j) wt[j * channels + c] = weight[c * kernel + j];
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(channels, 1));
  parallel_blocks(tokens, grain, tokens * channels * (2 * kernel + 20), [&](int64_t t0, int64_t t1) {
    k.conv1d_silu_tokens(x, t0, t1, channels, wt.data(), kernel, history, y);
  });
  // New history: the last kernel−1 inputs (older ones from the old history when tokens < kernel−1).
  const int64_t H = kernel - 1;
  if (H <= 0) return;
  std::vector<float> keep(static_cast<size_t>(H * channels));
  for (int64_t r = 0; r < H; ++r) {
    const int64_t s = tokens - H + r;
    const float* src = s < 0 ? history + (H + s) * channels : x + s * channels;
    std::copy(src, src + channels, keep.begin() + r * channels);
  }
  std::copy(keep.begin(), keep.end(), history);
}

void CpuBackend::gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                           int64_t n_v, float* g, float* beta) const {
  // tokens·n_v values per layer, plain fp32 libm (three calls each), over the team's threads:
  // on the calling thread alone it was milliseconds per layer at 2048 tokens.
  const int64_t grain = std::max<int64_t>(1, 1024 / std::max<int64_t>(n_v, 1));
  parallel_blocks(tokens, grain, tokens * n_v * 64, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < n_v; ++h) {
        const int64_t i = t * n_v + h;
        const float x = a[i] + dt_bias[h];
        const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
        g[i] = -std::exp(A_log[h]) * sp;
        beta[i] = 1.0f / (1.0f + std::exp(-b[i]));
      }
  });
}

void CpuBackend::gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                  float* out) const {
  if (in.tokens <= 0) return;
  const OpKernels& k = op_kernels();
  const int64_t C = kGatedDeltaChunk;
  const int64_t work = in.tokens * dims.state_floats() * 8;
#pragma omp parallel if (work >= kMinParallelWork && dims.n_v_heads > 1)
  {
    const FlushDenormals ftz;  // the decays e^γ of steep gates are far below the normal range
    std::vector<float> scratch(gated_delta_scratch_floats(dims, C));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < dims.n_v_heads; ++h)
      k.gated_delta_head(dims, in, h, C, state + h * dims.d_k * dims.d_v, out, scratch.data());
  }
}

void CpuBackend::gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                            float* out) const {
  if (in.tokens <= 0) return;
  const OpKernels& k = op_kernels();
  const int64_t work = in.tokens * dims.state_floats() * 6;
#pragma omp parallel if (work >= kMinParallelWork && dims.n_v_heads > 1)
  {
    const FlushDenormals ftz;
    std::vector<float> scratch(static_cast<size_t>(2 * dims.d_k + dims.d_v));
#pragma omp for schedule(static)
    for (int64_t h = 0; h < dims.n_v_heads; ++h)
      k.gated_delta_recurrent_head(dims, in, h, state + h * dims.d_k * dims.d_v, out, scratch.data());
  }
}

void CpuBackend::apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                            const float* cos, const float* sin) const {
  const OpKernels& k = op_kernels();
  const int64_t half = rotary_dim / 2;
  const int64_t grain = std::max<int64_t>(1, kElementGrain / std::max<int64_t>(heads * head_dim, 1));
  parallel_blocks(tokens, grain, tokens * heads * rotary_dim * 3, [&](int64_t t0, int64_t t1) {
    k.rope(x + t0 * heads * head_dim, t1 - t0, heads, head_dim, rotary_dim, cos + t0 * half, sin + t0 * half);
  });
}

void CpuBackend::attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                  const float* k, const float* v, float* out) const {
  if (tokens <= 0) return;
  const int64_t nq = shape.n_q_heads, nkv = shape.n_kv_heads, d = shape.head_dim, group = nq / nkv;
  const int64_t qb = query_block(tokens, nkv), blocks = (tokens + qb - 1) / qb;
  const int64_t work = 4 * tokens * (q_pos0 + tokens) * nq * d;
  const AttentionKeys keys{k, nkv * d, nkv, q_pos0 + tokens, d};
  attention_tasks(nkv * blocks, qb * group, keys, work,
                  [&](int64_t task, AttentionRows& a, const float** qr, float** orow, int64_t* nk) {
                    // Last query blocks first: they are the longest, so dynamic scheduling balances.
                    const int64_t block = blocks - 1 - task / nkv, kvh = task % nkv;
                    const int64_t t0 = block * qb, t1 = std::min(tokens, t0 + qb);
                    int64_t r = 0;
                    for (int64_t t = t0; t < t1; ++t)
                      for (int64_t g = 0; g < group; ++g, ++r) {
                        const int64_t h = kvh * group + g;
                        qr[r] = q + (t * nq + h) * d;
                        orow[r] = out + (t * nq + h) * d;
                        nk[r] = q_pos0 + t + 1;
                      }
                    a.rows = r;
                    a.k = k + kvh * d;
                    a.v = v + kvh * d;
                    a.kv_stride = nkv * d;
                    a.scale = shape.scale;
                    return kvh;
                  });
}

void CpuBackend::attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows,
                                 const float* k, const float* v, int64_t kv_stride, int64_t kv_rows, float* out,
                                 int64_t out_stride) const {
  if (q_rows <= 0) return;
  const int64_t nq = shape.n_q_heads, nkv = shape.n_kv_heads, d = shape.head_dim, group = nq / nkv;
  const int64_t qb = query_block(q_rows, nkv), blocks = (q_rows + qb - 1) / qb;
  const int64_t work = 4 * q_rows * kv_rows * nq * d;
  const AttentionKeys keys{k, kv_stride, nkv, kv_rows, d};
  attention_tasks(nkv * blocks, qb * group, keys, work,
                  [&](int64_t task, AttentionRows& a, const float** qr, float** orow, int64_t* nk) {
                    const int64_t block = task / nkv, kvh = task % nkv;
                    const int64_t i0 = block * qb, i1 = std::min(q_rows, i0 + qb);
                    int64_t r = 0;
                    for (int64_t i = i0; i < i1; ++i)
                      for (int64_t g = 0; g < group; ++g, ++r) {
                        const int64_t h = kvh * group + g;
                        qr[r] = q + i * q_stride + h * d;
                        orow[r] = out + i * out_stride + h * d;
                        nk[r] = kv_rows;
                      }
                    a.rows = r;
                    a.k = k + kvh * d;
                    a.v = v + kvh * d;
                    a.kv_stride = kv_stride;
                    a.scale = shape.scale;
                    return kvh;
                  });
}

void CpuBackend::matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                           float* y) const {
  // An fp32 nn.Linear is a linear layer with an F32 weight: the same kernels.
  LinearWeight lw;
  lw.name = "matmul_nt";
  lw.out = N;
  lw.in = K;
  lw.format = WeightFormat::kF32;
  lw.data = w;
  lw.bias = bias;
  cpu::linear(lw, x, M, y);
}

const Backend& fast_backend() {
  (void)flush_denormals_enabled();  // a bad STAVE_CPU_DENORMALS fails here, not inside a parallel region
  static const CpuBackend backend;
  return backend;
}

}  // namespace stave::cpu
