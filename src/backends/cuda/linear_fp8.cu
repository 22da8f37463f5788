// MXFP4 W4A4 linear layers on FP8 tensor cores: the scheme is in linear_fp8.h.
#include <cublasLt.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backends/cuda/e2m1_e4m3.h"
#include "backends/cuda/gemm_mxfp4_fp8.h"
#include "backends/cuda/linear_fp8.h"
#include "backends/cuda/mxfp4_device.cuh"
#include "backends/cuda/quantize_fp8.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
constexpr int64_t kAlign = 16;          // cuBLASLt FP8: dimensions multiples of 16
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

std::atomic<int64_t> g_weights_fp8{0}, g_weights_out{0}, g_scaled_in_gemm{0}, g_scaled_after{0};
std::atomic<int64_t> g_weights_resident{0}, g_weights_not_kept{0}, g_weights_over_limit{0};
std::atomic<int64_t> g_gemms_fused{0}, g_gemms_copied{0}, g_plans_fit_tile{0};

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// One warp per weight row: over the blocks with a non-zero code, the largest and smallest E8M0
// byte. range[r] = largest − smallest (1000 with a NaN scale, −1 for an all-zero row);
// row_exp[r] = R_w = largest − 127 − 6, row_scale[r] = 2^R_w.
__global__ void weight_rows_kernel(const uint8_t* codes, const uint8_t* scales, int64_t N, int64_t K, int* range,
                                   int* row_exp, float* row_scale) {
  const int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (r >= N) return;
  const int64_t nb = K / 32;
  int hi = -1, lo = 256;
  for (int64_t b = lane; b < nb; b += 32) {
    const uint4 c = *reinterpret_cast<const uint4*>(codes + r * (K / 2) + b * 16);
    if (((c.x | c.y | c.z | c.w) & 0x77777777u) == 0) continue;  // ±0 codes only
    const int e = scales[r * nb + b];
    hi = max(hi, e);
    lo = min(lo, e);
  }
  for (int o = 16; o > 0; o >>= 1) {
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
  }
  if (lane) return;
  const int ref = hi < 0 ? 0 : hi - 127 - kMaxShift;
  range[r] = hi < 0 ? -1 : (hi == 255 ? 1000 : hi - lo);
  row_exp[r] = ref;
  row_scale[r] = ldexpf(1.0f, ref);
}

// Packed MXFP4 [N, K/2] + E8M0 [N, K/32] -> E4M3 [N, K] = E2M1 · 2^(e − 127 − R_w[row]), one
// thread per 16 weights (8 code bytes in, 16 bytes out). Exact for a weight that fits; all-zero
// blocks (any exponent) give ±0 through the clamp.
__global__ void expand_fp8_kernel(const uint8_t* codes, const uint8_t* scales, const int* row_exp, int64_t n_chunks,
                                  int64_t K, uint8_t* out) {
  __shared__ float table[16];
  if (threadIdx.x < 16) table[threadIdx.x] = kE2M1[threadIdx.x];
  __syncthreads();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n_chunks) return;
  const int64_t chunks_per_row = K / 16;
  const int64_t r = i / chunks_per_row, c = i % chunks_per_row;
  const int d = block_shift(scales[r * (K / 32) + c / 2], row_exp[r]);
  const float s = __uint_as_float(static_cast<uint32_t>(127 + d) << 23);
  const uint2 packed = *reinterpret_cast<const uint2*>(codes + r * (K / 2) + c * 8);
  uint32_t words[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    // Output bytes 4q … 4q+3 come from code bytes 2q and 2q+1 (low nibble first).
    uint32_t w = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int b = 2 * q + h;
      const uint32_t byte = ((b < 4 ? packed.x : packed.y) >> (8 * (b % 4))) & 0xffu;
      const float2 v = make_float2(table[byte & 0x0f] * s, table[byte >> 4] * s);
      w |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3)) << (16 * h);
    }
    words[q] = w;
  }
  *reinterpret_cast<uint4*>(out + r * K + c * 16) = make_uint4(words[0], words[1], words[2], words[3]);
}

// The same bytes by table lookup (ExpandKernel::kPerm): e2m1_e4m3.h's eight-byte table per
// shift (in shared memory), one byte_perm per four codes' magnitudes and the signs moved, as the
// fused GEMM expands its tiles: 68 PTX instructions per 16 weights after the table setup against
// the float form's 140. One thread per MX block of 32 weights (K % 32 == 0; since 2026-12-07 13:50,
// one per 16 before): thread i reads code bytes 16i … 16i + 15 and scale byte i, and writes output
// bytes 32i … 32i + 31, so the block's scale, row exponent and table are looked up once for its
// 32 weights and the index division (in `Index`: 32-bit where the blocks fit) is done once.
template <class Index>
__global__ void expand_fp8_perm_kernel(const uint8_t* codes, const uint8_t* scales, const int* row_exp, Index n_blocks,
                                       Index blocks_per_row, uint8_t* out) {
  constexpr int kTables = kMaxShift - kMinShift + 1;
  __shared__ uint2 tables[kTables];
  if (threadIdx.x < kTables) tables[threadIdx.x] = e4m3_shift_table(kMinShift + static_cast<int>(threadIdx.x));
  __syncthreads();
  const Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  if (i >= n_blocks) return;
  const uint4 packed = *reinterpret_cast<const uint4*>(codes + static_cast<int64_t>(i) * 16);
  const uint2 table = tables[block_shift(scales[i], row_exp[i / blocks_per_row]) - kMinShift];
  const uint2 w0 = e2m1x8_to_e4m3(packed.x, table), w1 = e2m1x8_to_e4m3(packed.y, table);
  const uint2 w2 = e2m1x8_to_e4m3(packed.z, table), w3 = e2m1x8_to_e4m3(packed.w, table);
  uint4* dst = reinterpret_cast<uint4*>(out + static_cast<int64_t>(i) * 32);
  dst[0] = make_uint4(w0.x, w0.y, w1.x, w1.y);
  dst[1] = make_uint4(w2.x, w2.y, w3.x, w3.y);
}

// A packed weight expanded to E4M3 [rows, cols] in out, on stream s (per product, once to keep,
// or ahead on a side stream), by STAVE_CUDA_EXPAND_KERNEL's form.
void expand_by_env(const Fp8Source& w, uint8_t* out, cudaStream_t s) {
  dev::expand_fp8(w, out, s, expand_kernel_from_env());
}
void expand_weight_fp8(const DeviceLinear& w, uint8_t* out, cudaStream_t s) { expand_by_env(*w.fp8_source, out, s); }

// y[m, n] = acc[m, n] · sa[m] · sw[n] (+ bias[n]) for m < M (acc has ld N).
__global__ void scale_rows_cols_kernel(const float* acc, int64_t M, int64_t N, const float* sa, const float* sw,
                                       const float* bias, float* y) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= M * N) return;
  const int64_t m = i / N, n = i % N;
  const float v = acc[i] * sa[m] * sw[n];
  y[i] = bias ? v + bias[n] : v;
}

}  // namespace

// One cuBLASLt plan per (padded M, N, K, scales in the GEMM): descriptors and the heuristic's
// algorithm, made once. `in_gemm` false: cuBLASLt offered no algorithm with per-row scale
// vectors (or the path asks for the epilogue), so the GEMM is unscaled and a kernel scales.
struct Fp8Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool in_gemm = false;
  bool ok = true;  // false: cuBLASLt offers no FP8 GEMM of this shape (the BF16 path runs)
  // The activation's columns in b and d as set now: the padded Mp the plan was made for, or a
  // call's M (fp8_product writes the M rows straight into the caller's output). padded_only:
  // the algorithm refused an M short of Mp once, so this plan keeps Mp (and the copy).
  int64_t cols = 0;
  bool padded_only = false;
};

// Sets the activation's column count of p's B and D layouts (no-op when it already is).
void set_cols(Fp8Plan& p, int64_t cols) {
  if (p.cols == cols) return;
  const uint64_t c = static_cast<uint64_t>(cols);
  STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.b, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof(c)));
  STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.d, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof(c)));
  p.cols = cols;
}

// STAVE_CUDA_FP8_ACCUM (linear_fp8.h). An experiment's switch: "fast" and "block" are not the
// default until the fixture decisions and the fidelity rule are measured with them.
Fp8Accum fp8_accum_from_env() {
  return env_choice<Fp8Accum>("STAVE_CUDA_FP8_ACCUM",
                              {{"promote", Fp8Accum::kStep}, {"fast", Fp8Accum::kWhole}, {"block", Fp8Accum::kBlock}});
}

// STAVE_CUDA_FP8_ALGO=N: the N-th algorithm cuBLASLt's heuristic offers for each product (0, the
// default, is its first choice; a shape with fewer takes its last), so that a whole decision can
// be timed with another one (bench_cuda_fp8_gemm times them one product at a time). Fixed per
// process, so the same input gives the same bits run after run.
static int algo_index_from_env() { return env_int("STAVE_CUDA_FP8_ALGO", 0, 31, 0); }

// STAVE_CUDA_FP8_CLUSTER: "pairs" → the heuristic's algorithm with thread-block clusters
// of 1 × 2 × 1 where it asks for 1 × 1 × 1, the product has N ≥ kPairsFromN outputs and at least
// kPairsFromRows (padded) rows, and cublasLtMatmulAlgoCheck accepts it; "heuristic" → the
// heuristic's own configuration. Fewer rows (batched decode steps: one or two row tiles) keep the
// heuristic's: not measured there.
// bench_cuda_fp8_gemm's search (STAVE_BENCH_SEARCH, an H100, 2026-12-06): 1 × 2 × 1 was the
// fastest cluster shape at 1024–8192 rows for the 27B's products of N ≥ 5120 (1.03–1.20× the
// heuristic's; attention k / v, N = 1024, gained nothing); at 512 rows taller clusters are
// faster still for most of them. On the 27B: 12 / 52 ms off the backbone at 2048 / 8192 tokens,
// < 1 ms at 512. The tile and the stages are the heuristic's; the fixture decisions' worst
// differences did not change. ("tall", 1 × 4 × 1 clusters below 1,024 rows, measured slower end
// to end on an H100, 2026-12-07: 27B backbone 64.4 → 72.1 ms at 516 tokens; removed.)
// Unset or "fit" (the default since 2026-12-07 16:30): as "pairs", and from kPairsFromRows to
// kFitBelowRows padded rows (fewer,
// the batched decode steps, were not searched) the tile whose token side
// covers them with the fewest padded rows (fit_tile): the heuristic's 128 × 128 tile computes 640
// rows for a 516-token decision (528 padded), a quarter of the products' work for 16 rows. At 528
// rows bench_cuda_fp8_gemm's search (an H100) found 64 × 176 tiles (3 × 176 = 528) in 4 × 1 × 1
// clusters 1.45–1.73× faster than the heuristic's for MLP down, GDN qkv and GDN out, and 128 × 136
// tiles 1.43–1.54× for MLP up, GDN z and attention q. On the 64-layer 27B (an H100, 2026-12-07,
// `stave bench --prompt-tokens 516,700,2048`, alternated twice): 72.6 / 72.5 → 58.9 / 58.5 ms at
// 516 tokens, 71.7 / 72.0 against 72.0 / 71.6 at 700 (704 rows: four 176-row tiles, no faster than
// six of 128), 2048 tokens untouched.
enum class ClusterRule { kPairs, kHeuristic, kFit };
static ClusterRule cluster_rule_from_env() {
  return env_choice<ClusterRule>("STAVE_CUDA_FP8_CLUSTER", {{"fit", ClusterRule::kFit},
                                                            {"pairs", ClusterRule::kPairs},
                                                            {"heuristic", ClusterRule::kHeuristic}});
}
constexpr int64_t kFitBelowRows = 1024;

// The candidate tiles of the "fit" rule: token side, cuBLASLt's tile and the cluster shape it ran
// fastest in at 528 rows.
struct FitTile {
  int64_t rows;
  uint32_t tile;     // CUBLASLT_ALGO_CONFIG_TILE_ID is a uint32_t
  uint16_t cluster;  // CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID a uint16_t
};
constexpr FitTile kFitTiles[] = {{176, CUBLASLT_MATMUL_TILE_64x176, CUBLASLT_CLUSTER_SHAPE_4x1x1},
                                 {136, CUBLASLT_MATMUL_TILE_128x136, CUBLASLT_CLUSTER_SHAPE_1x1x1}};
constexpr int64_t kPairsFromN = 2048, kPairsFromRows = 512;

struct Fp8Gemm {
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer workspace;
  Fp8Accum accum = fp8_accum_from_env();
  dev::FusedKernel fused_kernel = dev::fused_kernel_from_env();  // with LinearPath::kFp8Fused
  int algo_index = algo_index_from_env();
  ClusterRule cluster_rule = cluster_rule_from_env();
  int sm_target = gemm_sm_target_from_env();  // 0: all SMs
  // STAVE_CUDA_FP8_ROWS=padded: every product over the padded Mp rows through scratch and a copy,
  // as before 2026-12-06 (for A/B runs); unset or "exact": straight into the output.
  bool padded_rows = env_choice<bool>("STAVE_CUDA_FP8_ROWS", {{"exact", false}, {"padded", true}});
  // STAVE_CUDA_QUANT_ROWS=staged: activation rows of 16,416 values or more (SwiGLU's product of
  // the 27B) quantized through shared memory (quantize_fp8.h); "registers": the register form.
  bool staged_rows = env_choice<bool>("STAVE_CUDA_QUANT_ROWS", {{"registers", false}, {"staged", true}});
  bool ahead = expand_ahead_from_env();
  int ahead_depth = expand_depth_from_env();  // STAVE_CUDA_EXPAND_DEPTH
  std::unique_ptr<ExpandAhead> expand_ahead;  // made on the first expansion with `ahead`
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Fp8Plan> plans;

  Fp8Gemm() {
    STAVE_CUBLAS_CHECK(cublasLtCreate(&lt));
    workspace.resize(kWorkspaceBytes);  // once per context, on its first FP8 product
  }
  ~Fp8Gemm() {
    for (auto& [key, p] : plans) destroy(p);
    if (lt) cublasLtDestroy(lt);
  }
  static void destroy(Fp8Plan& p) {
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
    p = {};
  }

  // Column-major view as the BF16 path: D (N × Mp, ld N) = op(A) · B with A = W (K × N, ld K,
  // transposed: Hopper's "TN") and B = x (K × Mp, ld K). With scales in the GEMM, A's scale
  // vector has N entries (2^R_w) and B's Mp (2^R_a), as OUTER_VEC_32F defines.
  bool try_plan(Fp8Plan& p, int64_t Mp, int64_t N, int64_t K, bool scaled) {
    STAVE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (sm_target > 0)
      STAVE_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof(sm_target)));
    if (accum == Fp8Accum::kWhole) {  // cuBLASLt's FAST_ACCUM
      const int8_t fast = 1;
      STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    if (scaled) {
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      if (cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)) !=
              CUBLAS_STATUS_SUCCESS ||
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)) !=
              CUBLAS_STATUS_SUCCESS)
        return why_unscaled(Mp, N, K, "the scale mode was refused", CUBLAS_STATUS_SUCCESS);
      // Scale pointers set before the heuristic is asked, as a call will have them (the
      // workspace stands in; each call sets the real ones).
      const void* stand_in = workspace.as<void>();
      STAVE_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &stand_in, sizeof(stand_in)));
      STAVE_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &stand_in, sizeof(stand_in)));
    }
    STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K));
    STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, Mp, K));
    STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, N, Mp, N));
    cublasLtMatmulPreference_t pref = nullptr;
    STAVE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    STAVE_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // Without split-K where cuBLASLt has such an algorithm, so that a row's sums depend less on
    // how many rows share the call (FP8 sums carry fewer bits than fp32: another order moves
    // them by ~1e-4, enough to flip the next layer's MXFP4 rounding between a packed prefill
    // and the same sequence alone). The tile shape may still differ with M.
    const uint32_t no_split = CUBLASLT_REDUCTION_SCHEME_NONE;
    (void)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_split,
                                               sizeof(no_split));
    cublasLtMatmulHeuristicResult_t results[32] = {};
    const int want = algo_index + 1;
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, want, results, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      const uint32_t any = CUBLASLT_REDUCTION_SCHEME_MASK;
      (void)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &any, sizeof(any));
      st = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, want, results, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
      return scaled ? why_unscaled(Mp, N, K, "the heuristic offers no algorithm", st) : false;
    p.algo = results[std::min(algo_index, found - 1)].algo;
    if (cluster_rule != ClusterRule::kHeuristic && N >= kPairsFromN && Mp >= kPairsFromRows) {
      const bool fitted = cluster_rule == ClusterRule::kFit && Mp < kFitBelowRows && fit_tile(p, Mp);
      if (!fitted) prefer_clusters(p);
    }
    p.in_gemm = scaled;
    p.cols = Mp;
    return true;
  }

  // The "fit" rule: where the heuristic's tile is 128 × 128, the candidate (kFitTiles) that pads
  // the Mp rows least, if it pads them less than 128-row tiles do and cublasLtMatmulAlgoCheck
  // accepts it (then the next best); true if the plan took one.
  bool fit_tile(Fp8Plan& p, int64_t Mp) const {
    uint32_t tile = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written) !=
            CUBLAS_STATUS_SUCCESS ||
        tile != CUBLASLT_MATMUL_TILE_128x128)
      return false;
    std::vector<FitTile> better;
    for (const FitTile& f : kFitTiles)
      if (round_up(Mp, f.rows) < round_up(Mp, 128)) better.push_back(f);
    std::stable_sort(better.begin(), better.end(),
                     [Mp](const FitTile& a, const FitTile& b) { return round_up(Mp, a.rows) < round_up(Mp, b.rows); });
    for (const FitTile& f : better) {
      cublasLtMatmulAlgo_t changed = p.algo;
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoConfigSetAttribute(&changed, CUBLASLT_ALGO_CONFIG_TILE_ID, &f.tile, sizeof(f.tile)) ==
              CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoConfigSetAttribute(&changed, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &f.cluster,
                                               sizeof(f.cluster)) == CUBLAS_STATUS_SUCCESS &&
          cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.d, p.d, &changed, &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= kWorkspaceBytes) {
        p.algo = changed;
        ++g_plans_fit_tile;
        return true;
      }
    }
    return false;
  }

  // The plan's algorithm with 1 × 2 × 1 clusters (STAVE_CUDA_FP8_CLUSTER) where the heuristic
  // chose 1 × 1 × 1, if cuBLASLt accepts it; otherwise unchanged.
  void prefer_clusters(Fp8Plan& p) const {
    uint16_t cluster = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster),
                                             &written) != CUBLAS_STATUS_SUCCESS ||
        cluster != CUBLASLT_CLUSTER_SHAPE_1x1x1)
      return;
    try_cluster(p, CUBLASLT_CLUSTER_SHAPE_1x2x1);
  }
  bool try_cluster(Fp8Plan& p, uint16_t shape) const {
    cublasLtMatmulAlgo_t changed = p.algo;
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&changed, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape, sizeof(shape)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.d, p.d, &changed, &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > kWorkspaceBytes)
      return false;
    p.algo = changed;
    return true;
  }

  // Says once per process on stderr why a product's row scales go into a kernel after the GEMM
  // instead of the GEMM (an extra pass over the output); returns false.
  static bool why_unscaled(int64_t Mp, int64_t N, int64_t K, const char* why, cublasStatus_t st) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr,
                   "stave cuda: cuBLASLt FP8 GEMM with row scales (OUTER_VEC_32F) for M %lld, N %lld, K %lld: %s "
                   "(status %d); the scales are applied after the GEMM\n",
                   static_cast<long long>(Mp), static_cast<long long>(N), static_cast<long long>(K), why,
                   static_cast<int>(st));
    return false;
  }

  // The plan of this shape, made on first use; nullptr where cuBLASLt has no FP8 algorithm for
  // it (said once on stderr; the caller takes the BF16 path).
  Fp8Plan* plan(int64_t Mp, int64_t N, int64_t K, bool want_scaled) {
    const auto key = std::make_tuple(Mp, N, K, want_scaled);
    auto it = plans.find(key);
    if (it == plans.end()) {
      Fp8Plan p;
      if (!(want_scaled && try_plan(p, Mp, N, K, true))) {
        destroy(p);
        if (!try_plan(p, Mp, N, K, false)) {
          destroy(p);
          p.ok = false;
          std::fprintf(stderr, "stave cuda: cuBLASLt offers no FP8 E4M3 GEMM for M %lld, N %lld, K %lld: BF16 products\n",
                       static_cast<long long>(Mp), static_cast<long long>(N), static_cast<long long>(K));
        }
      }
      it = plans.emplace(key, p).first;
    }
    return it->second.ok ? &it->second : nullptr;
  }

  // A scaled plan whose GEMM failed at run time: the unscaled plan (scales after) takes its key,
  // so later calls of this shape do not try again.
  void demote(int64_t Mp, int64_t N, int64_t K) {
    Fp8Plan& p = plans.at(std::make_tuple(Mp, N, K, true));
    destroy(p);
    if (!try_plan(p, Mp, N, K, false)) {
      destroy(p);
      plans.erase(std::make_tuple(Mp, N, K, true));
      throw Error(ErrorKind::kInternal, "cuBLASLt offers no unscaled FP8 E4M3 GEMM for M " + std::to_string(Mp) +
                                            ", N " + std::to_string(N) + ", K " + std::to_string(K));
    }
  }
};

std::shared_ptr<Fp8Gemm> make_fp8_gemm() { return std::make_shared<Fp8Gemm>(); }

LinearPath linear_path_from_env() {
  return env_choice<LinearPath>("STAVE_CUDA_LINEAR", {{"fp8", LinearPath::kFp8},
                                                      {"bf16", LinearPath::kBf16},
                                                      {"fp8-epilogue", LinearPath::kFp8EpilogueScales},
                                                      {"fp8-fused", LinearPath::kFp8Fused}});
}

ExpandKernel expand_kernel_from_env() {
  return env_choice<ExpandKernel>("STAVE_CUDA_EXPAND_KERNEL", {{"perm", ExpandKernel::kPerm}, {"float", ExpandKernel::kFloat}});
}

Fp8Weights fp8_weights_from_env() {
  return env_choice<Fp8Weights>("STAVE_CUDA_FP8_WEIGHTS",
                                {{"expand", Fp8Weights::kExpandPerProduct}, {"resident", Fp8Weights::kResident}});
}

namespace {

// w.fp8_weight = the E4M3 expansion of w (the bytes a product's expansion writes), or empty
// where `cache`'s limit or the device has no room for it: then products expand per call, as
// without kResident.
void keep_fp8_expansion(DeviceLinear& w, Fp8Cache* cache) {
  const int64_t N = w.out, K = w.in;
  if (cache && cache->limit_bytes >= 0 && cache->used_bytes + N * K > cache->limit_bytes) {
    if (cache->over++ == 0)
      std::fprintf(stderr,
                   "stave cuda: the FP8 weight cache is full at %.2f of %.2f GiB (%lld weights kept): %s and the "
                   "weights after it that do not fit expand per product\n",
                   static_cast<double>(cache->used_bytes) / (1 << 30),
                   static_cast<double>(cache->limit_bytes) / (1 << 30), static_cast<long long>(cache->kept),
                   w.name.c_str());
    ++g_weights_over_limit;
    return;
  }
  if (!w.fp8_weight.try_resize(static_cast<size_t>(N * K))) {
    if (g_weights_not_kept.fetch_add(1) == 0)
      std::fprintf(stderr,
                   "stave cuda: %s: no device memory left for its FP8 copy (%lld MB): this and later weights that "
                   "do not fit are expanded per product\n",
                   w.name.c_str(), static_cast<long long>(N * K >> 20));
    return;
  }
  expand_weight_fp8(w, w.fp8_weight.as<uint8_t>(), /*legacy stream*/ 0);
  // The legacy stream's kernel must be done before a product on the backend's non-blocking
  // stream reads the copy.
  STAVE_CUDA_CHECK(cudaDeviceSynchronize());
  ++g_weights_resident;
  if (cache) {
    cache->used_bytes += N * K;
    ++cache->kept;
  }
}

}  // namespace

void prepare_fp8_weight(DeviceLinear& w, Fp8Weights keep, Fp8Cache* cache) {
  w.fp8 = false;
  w.fp8_weight = DeviceBuffer();
  w.fp8_source.reset();
  if (w.format != WeightFormat::kMXFP4 || !w.quantize_input || w.in % 32 != 0) return;
  const int64_t N = w.out, K = w.in;
  DeviceBuffer range(static_cast<size_t>(N) * sizeof(int));
  w.fp8_row_exp.resize(static_cast<size_t>(N) * sizeof(int));
  w.fp8_row_scale.resize(static_cast<size_t>(N) * sizeof(float));
  weight_rows_kernel<<<blocks_for(N * 32), kThreads>>>(w.data.as<uint8_t>(), w.scales.as<uint8_t>(), N, K,
                                                       range.as<int>(), w.fp8_row_exp.as<int>(),
                                                       w.fp8_row_scale.as<float>());
  STAVE_CUDA_LAUNCHED();
  std::vector<int> host(static_cast<size_t>(N));
  range.download(host.data(), host.size() * sizeof(int));  // waits for the kernel (legacy stream)
  int64_t worst_row = 0, rows_out = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (host[r] > kMaxShift - kMinShift) ++rows_out;
    if (host[r] > host[worst_row]) worst_row = r;
  }
  if (rows_out == 0) {
    w.fp8 = true;
    w.fp8_source = std::make_shared<const Fp8Source>(Fp8Source{w.data.as<uint8_t>(), w.scales.as<uint8_t>(),
                                                               w.fp8_row_exp.as<int>(), N, K});
    ++g_weights_fp8;
    if (keep == Fp8Weights::kResident) keep_fp8_expansion(w, cache);
    return;
  }
  ++g_weights_out;
  w.fp8_row_exp = DeviceBuffer();
  w.fp8_row_scale = DeviceBuffer();
  std::fprintf(stderr,
               "stave cuda: %s: %lld of %lld rows have MXFP4 block exponents over more than %d binades (row %lld: "
               "%d): BF16 products for this weight\n",
               w.name.c_str(), static_cast<long long>(rows_out), static_cast<long long>(N), kMaxShift - kMinShift,
               static_cast<long long>(worst_row), host[worst_row]);
}

LinearFp8Stats linear_fp8_stats() {
  LinearFp8Stats s;
  s.weights_fp8 = g_weights_fp8.load();
  s.weights_out_of_range = g_weights_out.load();
  s.weights_fp8_resident = g_weights_resident.load();
  s.weights_fp8_not_kept = g_weights_not_kept.load();
  s.weights_fp8_over_limit = g_weights_over_limit.load();
  s.gemms_fused = g_gemms_fused.load();
  s.gemms_scaled_in_gemm = g_scaled_in_gemm.load();
  s.gemms_scaled_after = g_scaled_after.load();
  s.gemms_copied = g_gemms_copied.load();
  s.plans_fit_tile = g_plans_fit_tile.load();
  s.activation_blocks_rounded = activation_blocks_rounded();
  return s;
}

namespace dev {

namespace {

struct Fp8Operands {
  uint8_t *w, *x;
  float* x_scale;
  int64_t Mp;
};

// Whether cuBLASLt applies the row scales inside its GEMM (else a kernel after it).
bool scales_in_gemm(const GpuContext& ctx) {
  return ctx.linear_path() == LinearPath::kFp8 || ctx.linear_path() == LinearPath::kFp8Fused;
}

// Whether w's product runs in the fused MXFP4 GEMM (no expansion, no cuBLASLt) into y.
bool fused_product(const GpuContext& ctx, const DeviceLinear& w, const float* y) {
  return ctx.linear_path() == LinearPath::kFp8Fused && reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
         mxfp4_fp8_gemm_applies(w);
}

// Where the product's operands lie: the activation (and the weight's expansion, unless w keeps
// it resident or the fused GEMM reads it packed) in ctx's scratch, the same layout every call.
Fp8Operands fp8_operands(GpuContext& ctx, const DeviceLinear& w, int64_t M, bool grow, bool expanded = true) {
  const int64_t Mp = round_up(M, kAlign), N = w.out, K = w.in;
  const size_t x_bytes = static_cast<size_t>(round_up(Mp * K, 256));
  const bool resident = w.fp8_weight.bytes() != 0;
  if (grow) {
    if (!resident && expanded && !ctx.fp8_gemm().ahead) ctx.scratch_w().reserve(static_cast<size_t>(N * K));
    ctx.scratch_x().reserve(x_bytes + static_cast<size_t>(Mp) * sizeof(float));
  }
  uint8_t* xs = ctx.scratch_x().as<uint8_t>();
  return {resident ? w.fp8_weight.as<uint8_t>() : ctx.scratch_w().as<uint8_t>(), xs,
          reinterpret_cast<float*>(xs + x_bytes), Mp};
}

// The product (and the scales and bias) on operands already in scratch.
void fp8_product(GpuContext& ctx, const DeviceLinear& w, const Fp8Operands& op, int64_t M, const float* bias,
                 float* y) {
  const int64_t N = w.out, K = w.in;
  cudaStream_t s = ctx.stream();
  Fp8Gemm& g = ctx.fp8_gemm();
  Fp8Plan& p = *g.plan(op.Mp, N, K, scales_in_gemm(ctx));  // callers checked
  // Scales in the GEMM: straight into y's M rows when y has the 256-byte alignment cuBLASLt's
  // heuristic assumes by default (the layouts then take the call's M: the quantized input's
  // padding rows are not read, and each row's sums are the same as with them); otherwise (and
  // for the unscaled GEMM) all Mp rows into scratch, then copied or scaled into y.
  const bool direct = p.in_gemm && !((p.padded_only || g.padded_rows) && op.Mp != M) &&
                      reinterpret_cast<uintptr_t>(y) % 256 == 0;
  set_cols(p, direct ? M : op.Mp);
  float* d = y;
  if (!direct) {
    ctx.scratch_y().reserve(static_cast<size_t>(op.Mp * N) * sizeof(float));
    d = ctx.scratch_y().as<float>();
  }
  if (p.in_gemm) {
    const float* sw = w.fp8_row_scale.as<float>();
    STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof(sw)));
    STAVE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &op.x_scale, sizeof(op.x_scale)));
  }
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(g.lt, p.desc, &one, op.w, p.a, op.x, p.b, &zero, d, p.d, d, p.d, &p.algo,
                                           g.workspace.as<void>(), kWorkspaceBytes, s);
  if (st != CUBLAS_STATUS_SUCCESS && direct && op.Mp != M) {
    // The algorithm takes Mp rows but not M: this plan goes through scratch from now on.
    p.padded_only = true;
    return fp8_product(ctx, w, op, M, bias, y);
  }
  if (st != CUBLAS_STATUS_SUCCESS && p.in_gemm) {
    Fp8Gemm::why_unscaled(op.Mp, N, K, "cublasLtMatmul refused the heuristic's algorithm", st);
    // An algorithm with scale vectors that the library then refuses: scales after, from now on.
    g.demote(op.Mp, N, K);
    return fp8_product(ctx, w, op, M, bias, y);
  }
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas("cublasLtMatmul (FP8 E4M3)", st);
  if (p.in_gemm) {
    ++g_scaled_in_gemm;
    if (!direct) {
      ++g_gemms_copied;
      STAVE_CUDA_CHECK(cudaMemcpyAsync(y, d, static_cast<size_t>(M * N) * sizeof(float), cudaMemcpyDeviceToDevice, s));
    }
    if (bias) {
      dev::add_bias(y, M, N, bias, s);
    }
  } else {
    ++g_scaled_after;
    scale_rows_cols_kernel<<<blocks_for(M * N), kThreads, 0, s>>>(d, M, N, op.x_scale, w.fp8_row_scale.as<float>(),
                                                                 bias, y);
    STAVE_CUDA_LAUNCHED();
  }
}

}  // namespace

bool linear_fp8_applies(const GpuContext& ctx, const DeviceLinear& w) {
  return !ctx.exact() && ctx.linear_path() != LinearPath::kBf16 && w.fp8 && w.out % kAlign == 0 &&
         w.in % kAlign == 0;
}

bool linear_fp8_quantize_input(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M) {
  const int64_t N = w.out, K = w.in;
  const Fp8Operands op = fp8_operands(ctx, w, M, true);
  if (!ctx.fp8_gemm().plan(op.Mp, N, K, scales_in_gemm(ctx))) return false;
  launch_quantize_rows_fp8(x, M, op.Mp, K, mode_code(w.input_scale_mode), op.x, op.x_scale, ctx.stream(), 0,
                           ctx.fp8_gemm().staged_rows);
  return true;
}

bool linear_fp8_quantize_formed_input(GpuContext& ctx, const DeviceLinear& w, const float* x, const RowPrologue& pro,
                                     int64_t M) {
  const Fp8Operands op = fp8_operands(ctx, w, M, true);
  if (!ctx.fp8_gemm().plan(op.Mp, w.out, w.in, scales_in_gemm(ctx))) return false;
  return launch_quantize_formed(x, pro, M, op.Mp, w.in, mode_code(w.input_scale_mode), op.x, op.x_scale,
                                ctx.stream(), ctx.fp8_gemm().staged_rows);
}

bool linear_fp8_has_plan(GpuContext& ctx, const DeviceLinear& w, int64_t M) {
  return ctx.fp8_gemm().plan(round_up(M, kAlign), w.out, w.in, scales_in_gemm(ctx)) != nullptr;
}

bool linear_fp8_quantized(GpuContext& ctx, const DeviceLinear& w, int64_t M, float* y) {
  const int64_t N = w.out, K = w.in;
  const float* bias = w.bias.bytes() ? w.bias.as<float>() : nullptr;
  if (fused_product(ctx, w, y)) {
    const Fp8Operands op = fp8_operands(ctx, w, M, true, /*expanded=*/false);
    mxfp4_fp8_gemm(w, op.x, op.x_scale, M, op.Mp, bias, y, ctx.fp8_gemm().accum, ctx.fp8_gemm().fused_kernel,
                   ctx.stream());
    ++g_gemms_fused;
    return true;
  }
  Fp8Operands op = fp8_operands(ctx, w, M, true);
  Fp8Gemm& g = ctx.fp8_gemm();
  if (!g.plan(op.Mp, N, K, scales_in_gemm(ctx))) return false;
  if (!w.fp8_weight.bytes()) {
    if (g.ahead) {
      if (!g.expand_ahead) g.expand_ahead = std::make_unique<ExpandAhead>(ctx.stream(), expand_by_env, g.ahead_depth);
      op.w = const_cast<uint8_t*>(g.expand_ahead->weight(w.fp8_source));
    } else {
      expand_weight_fp8(w, op.w, ctx.stream());
    }
  }
  fp8_product(ctx, w, op, M, bias, y);
  return true;
}

bool linear_fp8(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y) {
  if (M <= 0) return true;
  return linear_fp8_quantize_input(ctx, w, x, M) && linear_fp8_quantized(ctx, w, M, y);
}

void expand_fp8(const Fp8Source& w, uint8_t* out, cudaStream_t s, ExpandKernel kernel) {
  const int64_t N = w.rows, K = w.cols, chunks = N * K / 16, mx_blocks = N * K / 32;
  if (chunks <= 0) return;
  if (kernel == ExpandKernel::kPerm && mx_blocks < (int64_t{1} << 31))
    expand_fp8_perm_kernel<uint32_t><<<blocks_for(mx_blocks), kThreads, 0, s>>>(
        w.codes, w.scales, w.row_exp, static_cast<uint32_t>(mx_blocks), static_cast<uint32_t>(K / 32), out);
  else if (kernel == ExpandKernel::kPerm)
    expand_fp8_perm_kernel<int64_t><<<blocks_for(mx_blocks), kThreads, 0, s>>>(w.codes, w.scales, w.row_exp,
                                                                              mx_blocks, K / 32, out);
  else
    expand_fp8_kernel<<<blocks_for(chunks), kThreads, 0, s>>>(w.codes, w.scales, w.row_exp, chunks, K, out);
  STAVE_CUDA_LAUNCHED();
}

ExpandAheadCounts expand_ahead_counts(GpuContext& ctx) {
  const ExpandAhead* a = ctx.fp8_gemm().expand_ahead.get();
  return a ? ExpandAheadCounts{a->hits(), a->misses()} : ExpandAheadCounts{};
}

void linear_fp8_gemm_only(GpuContext& ctx, const DeviceLinear& w, int64_t M, float* y) {
  if (M <= 0) return;
  Fp8Operands op = fp8_operands(ctx, w, M, false);
  Fp8Gemm& g = ctx.fp8_gemm();
  if (!w.fp8_weight.bytes() && g.expand_ahead) op.w = const_cast<uint8_t*>(g.expand_ahead->last());
  if (fused_product(ctx, w, y))
    return mxfp4_fp8_gemm(w, op.x, op.x_scale, M, op.Mp, nullptr, y, ctx.fp8_gemm().accum, ctx.fp8_gemm().fused_kernel,
                   ctx.stream());
  if (ctx.fp8_gemm().plan(op.Mp, w.out, w.in, scales_in_gemm(ctx)))
    fp8_product(ctx, w, op, M, nullptr, y);
}

}  // namespace dev
}  // namespace stave::cuda
