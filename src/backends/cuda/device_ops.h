// The CUDA backend's ops on device pointers: what CudaBackend
// calls (the model passes device pointers; the head passes its own uploads). Each op keeps the semantics
// of its fp32 reference op (src/ops); comments name it. All launches go to `stream`.
//
// Precision: `exact` evaluates linear layers with fp64 accumulation (weights and MXFP4-QDQ'd
// activations widened exactly to double, cuBLAS DGEMM) and every op in double where the
// reference uses double; `fast` runs linear layers on BF16 tensor cores (cuBLAS, fp32
// accumulation). MXFP4 weights stay packed on the GPU; fast mode expands them to BF16 tiles,
// which is exact (E2M1 × 2^e fits BF16), and a QDQ'd activation is exact in BF16 too, so W4A4
// products are exact and only the fp32 accumulation order differs from the reference. Other
// activations (BF16 releases) are split into BF16 hi + lo and take two products, which keeps
// about 16 significant bits of the fp32 activation (one BF16 rounding moved fixture
// probabilities by up to 0.03). Fast W4A4 MXFP4 layers take FP8 tensor cores where the
// weight's rows fit (linear_fp8.h; LinearPath, STAVE_CUDA_LINEAR).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backends/cuda/attention_kernel.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/expand_ahead.h"
#include "backends/cuda/fp8_weights.h"
#include "formats/linear_weight.h"
#include "ops/attention.h"
#include "ops/gated_delta_net.h"

namespace stave::cuda {

// True when a CUDA device is usable (tests skip otherwise).
bool device_available();

// A linear weight resident on the GPU in its stored format (MXFP4 stays packed).
struct DeviceLinear {
  std::string name;
  int64_t out = 0, in = 0;
  WeightFormat format = WeightFormat::kBF16;
  bool quantize_input = false;
  mxfp4::ScaleMode input_scale_mode = mxfp4::ScaleMode::kEven;
  DeviceBuffer data, scales, bias;  // bias: fp32 [out] or empty
  // The FP8 path (linear_fp8.cu): set at upload for MXFP4 W4A4 weights whose every row's
  // block exponents fit one reference R_w (E2M1 · 2^(e − R_w) exact in E4M3); fp8_row_scale
  // holds 2^R_w per output row (fp32 [out]), fp8_row_exp R_w (int32 [out]).
  bool fp8 = false;
  DeviceBuffer fp8_row_exp, fp8_row_scale;
  // The E4M3 expansion [out, in] kept resident (Fp8Weights::kResident), or empty: then every
  // product expands the packed weight into scratch first.
  DeviceBuffer fp8_weight;
  // What that expansion reads (set with fp8; expand_ahead.h).
  std::shared_ptr<const Fp8Source> fp8_source;
};
// fp8_check: decide DeviceLinear::fp8 (fast precision); a weight that does not fit is counted
// (linear_fp8_stats) and named on stderr once. `keep` kResident also keeps the weight's E4M3
// expansion where it fits, device memory allows and `cache` (if given) has room (else it falls
// back to per-product expansion, said once on stderr and counted).
DeviceLinear upload_linear(const LinearWeight& w, bool fp8_check = false,
                           Fp8Weights keep = Fp8Weights::kExpandPerProduct, Fp8Cache* cache = nullptr);

// Which products fast-precision MXFP4 W4A4 linear layers use (exact precision: always fp64).
enum class LinearPath {
  kBf16,             // weights expanded to BF16, cuBLAS BF16 GEMM
  kFp8,              // weights and activations as FP8 E4M3 with per-row exponents, cuBLASLt FP8
  kFp8EpilogueScales,  // the same, the row scales applied by a kernel after the GEMM (tests)
  kFp8Fused,  // kFp8 with the fused MXFP4 GEMM where it applies (gemm_mxfp4_fp8.h): no expansion pass
};
// STAVE_CUDA_LINEAR: unset or "fp8" → kFp8, "bf16" → kBf16, "fp8-epilogue" → kFp8EpilogueScales,
// "fp8-fused" → kFp8Fused; anything else is an Error naming the variable.
LinearPath linear_path_from_env();
struct Fp8Gemm;  // cuBLASLt handle, workspace and plans (linear_fp8.cu)
std::shared_ptr<Fp8Gemm> make_fp8_gemm();

// Per-stream state: cuBLAS handle and growable scratch for linear layers. Not thread-safe.
class GpuContext {
 public:
  explicit GpuContext(bool exact, AttentionKernel attention = AttentionKernel::kAuto);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  bool exact() const { return exact_; }
  AttentionKernel attention_kernel() const { return attention_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  DeviceBuffer& scratch_w() { return w_; }
  DeviceBuffer& scratch_x() { return x_; }
  DeviceBuffer& scratch_y() { return y_; }
  DeviceBuffer& scratch_scores() { return scores_; }  // attention scores of one query chunk
  DeviceBuffer& scratch_wide() { return wide_; }      // fp64 copies of an exact op's inputs
  LinearPath linear_path() const { return linear_path_; }
  void set_linear_path(LinearPath p) { linear_path_ = p; }  // benchmarks measure both in one run
  Fp8Gemm& fp8_gemm() {  // made on first use
    if (!fp8_) fp8_ = make_fp8_gemm();
    return *fp8_;
  }
  void synchronize() const;

 private:
  bool exact_;
  AttentionKernel attention_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer w_, x_, y_, scores_, wide_;
  LinearPath linear_path_ = LinearPath::kFp8;
  std::shared_ptr<Fp8Gemm> fp8_;
};

namespace dev {

// y[M, w.out] = x[M, w.in] · Wᵀ (+ bias), W4A4 QDQ of x for MXFP4 weights (ref::linear).
void linear(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y);

// Products over the same x (Backend::linear_shared_input): each as linear(ctx, *w, x, M, y),
// but the FP8 products whose weights share K and the W4A4 scale mode quantize x once.
struct SharedProduct {
  const DeviceLinear* w;
  float* y;
};
void linear_shared_input(GpuContext& ctx, const float* x, int64_t M, std::span<const SharedProduct> products);

// What the first step forms from its operands as it loads a row (quantize_fp8.cu), so
// that the input of the product is never written: the element-wise op before a projection,
// fused into the projection's quantization with that op's fast-precision rounding.
enum class Prologue {
  kPlain,        // x itself
  kSiluUp,       // silu(x) ⊙ aux: SwiGLU's product (silu_mul_fast)
  kSigmoidGate,  // x ⊙ sigmoid(aux): the attention's output gate (sigmoid_mul_fast)
  kGatedNorm,    // per head of 8 · norm_lanes values: norm_w ⊙ x / sqrt(mean x² + eps) ⊙ silu(aux),
                 // the Gated DeltaNet's gated RMSNorm (gated_rms_norm_fast's grouped form)
  kAddNorm,      // x + aux written to h_out (x's memory, the residual stream), then its zero-centred
                 // RMSNorm with norm_w [K], written to x_out unless null (add_rms_norm_zero_centered)
  kNorm,         // the same without the add (rms_norm_zero_centered)
};
struct RowPrologue {
  Prologue kind = Prologue::kPlain;
  const float* aux = nullptr;     // [M, K] beside x (up, the gate, z, the residual's addend)
  const float* norm_w = nullptr;  // kGatedNorm: [8 · norm_lanes]; kAddNorm, kNorm: [K]
  int norm_lanes = 0;             // kGatedNorm: head size / 8, a power of two ≤ 32
  float eps = 0.0f;               // the norms
  float* h_out = nullptr;  // kAddNorm
  float* x_out = nullptr;  // kAddNorm, kNorm: the normed rows, where a caller needs them
};
// y = linear(w, the row pro forms from x) on the FP8 path with the row formed inside the input's
// quantization (fast precision; the same bits as the element-wise op's fast kernel followed by
// linear). False, with nothing done, where that path does not apply (exact precision, the
// small-M kernel, BF16 products, shapes the fused quantization does not take): the caller
// composes the two ops.
bool formed_linear_fused(GpuContext& ctx, const DeviceLinear& w, const float* x, const RowPrologue& pro, int64_t M,
                         float* y);
// h += y (no add when y is null), then its zero-centred RMSNorm (w [dim]) as the input of the
// products over it (linear_shared_input), the norm formed inside the first product's FP8
// quantization (the bits of add_rms_norm_zero_centered's fast form). x [M, dim] receives the
// norm unless every product takes that quantization. False, with nothing done, where the first
// product does not take the fused path (w.in ≠ dim or as formed_linear_fused).
bool add_rms_norm_shared_fused(GpuContext& ctx, float* h, const float* y, int64_t M, int64_t dim, const float* w,
                               float eps, float* x, std::span<const SharedProduct> products);
// formed_linear_fused with silu(gate) ⊙ up.
bool silu_mul_linear_fused(GpuContext& ctx, const DeviceLinear& w, const float* gate, const float* up, int64_t M,
                           float* y);

// MXFP4 quantize-dequantize of rows of k values (mxfp4::qdq_row), bit-exact; out may alias x.
void mxfp4_qdq(const float* x, int64_t rows, int64_t k, mxfp4::ScaleMode mode, float* out, cudaStream_t s);

void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                            cudaStream_t s);
void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                    cudaStream_t s);
void silu_mul(const float* gate, const float* up, int64_t n, float* y, cudaStream_t s);
void sigmoid_mul(float* x, const float* gate, int64_t n, cudaStream_t s);
void add_inplace(float* h, const float* y, int64_t n, cudaStream_t s);
void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                        float* history, float* y, cudaStream_t s);
void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens, int64_t n_v,
               float* g, float* beta, cudaStream_t s);
// The gated delta rule (ref::gated_delta_rule_recurrent semantics; state fp32 in and out,
// carried in double (exact) or float (fast) inside the call). `qk_scratch` holds the
// normalised q and k: 2·tokens·n_k·d_k values. Packed sequences (batched prefill): `starts`
// (device, sequences + 1 values, starts[0] = 0, last = in.tokens) splits the tokens into
// independent sequences, each with its own state block (state holds sequences · state_floats).
void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state, float* out,
                      DeviceBuffer& qk_scratch, bool exact, cudaStream_t s, const int64_t* starts = nullptr,
                      int64_t sequences = 1);
void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                const float* sin, cudaStream_t s);
// embedding_ops.cu: h[t] = fp32(row ids[t] of table), or of row t where ids is null, for a BF16,
// F16 or F32 table [rows, in] in device memory (ids device int32 [L], each a row of the table; h
// device fp32 [L, in]). False (nothing done) for other formats.
bool embedding_rows(const void* table, WeightFormat format, int64_t in, const int32_t* ids, int64_t L, float* h,
                    cudaStream_t s);
// qg [rows, 2d] (per head [q | gate]) -> q [rows, d], gate [rows, d].
void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate, cudaStream_t s);

// fused_ops.cu: fast-precision forms of the element-wise ops above (fp32 math, 16-byte
// accesses), and the fused ops of backend.h (add_rms_norm_zero_centered, head_norm_rope).
void silu_mul_fast(const float* gate, const float* up, int64_t n, float* y, cudaStream_t s);
void sigmoid_mul_fast(float* x, const float* gate, int64_t n, cudaStream_t s);
// Bit-identical to add_inplace (one fp32 add per element), vectorized: both precisions.
void add_inplace_vec(float* h, const float* y, int64_t n, cudaStream_t s);
// grouped (the norms below too): the grouped layout of row_groups.cuh / gated_norm_group8 where
// the shape takes it (the layout the fused FP8 quantization repeats); false: the earlier kernels.
void gated_rms_norm_fast(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                         float* y, cudaStream_t s, bool grouped = true);
void causal_conv1d_silu_fast(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                             float* history, float* y, cudaStream_t s);
// h += y; x = rms_norm_zero_centered(h). exact: bit-identical to add_inplace followed by
// rms_norm_zero_centered above; fast: fp32 reduction, float4 accesses.
void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                float* x, bool exact, cudaStream_t s, bool grouped = true);
void rms_norm_zero_centered_fast(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                                 cudaStream_t s, bool grouped = true);
// Fast only: per-head rms_norm_zero_centered + apply_rope in one pass, the gate split out of
// [q | gate] rows when gate != nullptr (Backend::head_norm_rope).
void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w, float eps,
                    int64_t rotary_dim, const float* cos, const float* sin, float* y, float* gate, cudaStream_t s);
// Causal GQA attention (ref::attention_causal): q [tokens, nq·d] at positions q_pos0 …, k and v
// [q_pos0 + tokens, nkv·d]. Exact: fp64 cuBLAS products per chunk of queries, the chunk sized
// so that its scores fit `max_score_bytes`. Fast: the flash kernel where ctx.attention_kernel()
// picks it and flash_attention_supports the shape, else the same chunked products in fp32.
constexpr size_t kAttentionScoreBytes = size_t{512} << 20;
void attention_causal(GpuContext& ctx, const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                      const float* k, const float* v, float* out, size_t max_score_bytes = kAttentionScoreBytes);

// Non-causal attention: q [rows, nq·d], every query over all n_keys keys and values
// k/v [n_keys, nkv·d] (ref::mha_attend's core, ref::attention_dense with dense rows); fp32
// cuBLAS products, queries chunked to `max_score_bytes`. Fast precision only.
void attention_full(GpuContext& ctx, const AttentionShape& shape, const float* q, int64_t rows, const float* k,
                    const float* v, int64_t n_keys, float* out, size_t max_score_bytes = kAttentionScoreBytes);

// Multi-head attention of `rows` projected queries q [rows, E] (heads of d = E / heads) over
// the keys M·Wkᵀ + bk and values M·Wvᵀ + bv of a memory M [L, E], without forming either
// (the joint head's memory attentions, torch.nn.MultiheadAttention's core): per head the query
// is folded into the key projection, q'_h = scale · q_h · Wk_h [E] (bk only shifts a row's
// scores, which the softmax ignores), the scores are q'_h · M_l, C_h = Σ_l p_l M_l, and
// context_h = C_h · Wv_hᵀ + bv_h (the probabilities sum to 1). wk, wv: [E, E] row-major device
// matrices, bv [E]; context [rows, E]. Products: 2 · heads · rows · E · (L + d) multiply-adds
// against 2 · L · E² for projecting the memory, so it pays while heads · rows < E
// (attention_folded_pays). The score matrix [heads · rows, L] comes from the stream's pool.
// Fast precision only (fp32 cuBLAS products, no TF32).
bool attention_folded_pays(int64_t heads, int64_t E, int64_t rows, int64_t L, size_t max_score_bytes);
void attention_folded(GpuContext& ctx, int64_t heads, int64_t E, const float* q, int64_t rows, const float* memory,
                      int64_t L, const float* wk, const float* wv, const float* bv, float scale, float* qk_scratch,
                      float* scores, float* mixed, float* context);

// The fused kernel itself (attention_flash.cu): 3xTF32 tensor-core products, online softmax.
// Causal: query i at position q_pos0 + i sees keys 0 … q_pos0 + i; otherwise all n_keys keys.
bool flash_attention_supports(const AttentionShape& shape, const float* q, const float* k, const float* v,
                              const float* out, int64_t keys);
// Whether the flash kernel's grid (query tiles × heads) fills the GPU; otherwise the chunked
// cuBLAS products are faster.
bool flash_attention_pays(const AttentionShape& shape, int64_t tokens);
void flash_attention(cudaStream_t stream, const AttentionShape& shape, const float* q, int64_t tokens,
                     int64_t q_pos0, const float* k, const float* v, int64_t n_keys, bool causal, float* out);

// y[rows, dim] = (x − mean)/√(var + eps) · gamma + beta per row (ref::layer_norm), fp32 with the
// row's moments in double; y may alias x.
void layer_norm(const float* x, int64_t rows, int64_t dim, const float* gamma, const float* beta, float eps, float* y,
                cudaStream_t s);

// y[M, N] += bias[N] on every row, on stream s (M · N = 0: nothing).
void add_bias(float* y, int64_t M, int64_t N, const float* bias, cudaStream_t s);

// y[M, N] = x[M, K] · Wᵀ (+ bias) for an fp32 weight W [N, K] on the device (ref::matmul_nt):
// exact: fp64 accumulation (DGEMM on widened copies); fast: SGEMM (fp32, no TF32).
void matmul_nt(GpuContext& ctx, const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
               float* y);

}  // namespace dev
}  // namespace stave::cuda
