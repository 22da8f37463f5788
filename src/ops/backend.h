// The kernels a model runs on. The model code (src/model) is written against this interface;
// the reference backend is plain fp32 loops (the oracle and `--precision exact`), the CPU
// backend (src/backends/cpu) overrides ops with vectorized, multithreaded kernels, and the
// CUDA backend lives apart (src/backends/cuda). An op a backend does not override falls back
// to the reference implementation (the ref:: function named in the comment).
#pragma once
#include <cstdint>
#include <memory>

#include "formats/linear_weight.h"
#include "ops/attention.h"
#include "ops/gated_delta_net.h"
#include "ops/head_memory.h"
#include "stave/options.h"

namespace stave {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const { return "reference"; }

  // y[M, w.out] = x[M, w.in] · Wᵀ (+ bias); W4A4 activation quantization for MXFP4 weights.
  virtual void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const;

  // --- norms (reference.h, gated_delta_net.h) ---
  // y = x / sqrt(mean(x²) + eps) · (1 + w) per row of dim (y may alias x).
  virtual void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                      float* y) const;
  // y = w ⊙ x / sqrt(mean(x²) + eps) · silu(z) per row of dim (ref::gated_rms_norm).
  virtual void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y) const;

  // --- element-wise (elementwise.h) ---
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* y) const;
  virtual void sigmoid_mul(float* x, const float* gate, int64_t n) const;

  // --- Gated DeltaNet (conv1d.h, gated_delta_net.h) ---
  virtual void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                  int64_t kernel, float* history, float* y) const;
  virtual void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                         int64_t n_v, float* g, float* beta) const;
  // Prefill: the chunked form (chunk kGatedDeltaChunk). `out` must not alias the inputs.
  virtual void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                float* out) const;
  // Decode / oracle: the per-token recurrence.
  virtual void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                          float* out) const;

  // --- full attention (rope.h, attention.h) ---
  virtual void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                          const float* cos, const float* sin) const;
  virtual void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                const float* k, const float* v, float* out) const;

  // --- vision tower and joint head (attention.h, head_ops.h, reference.h) ---
  // Non-causal attention, every query over all kv_rows keys (ref::attention_dense).
  virtual void attention_dense(const AttentionShape& shape, const float* q, int64_t q_stride, int64_t q_rows,
                               const float* k, const float* v, int64_t kv_stride, int64_t kv_rows, float* out,
                               int64_t out_stride) const;
  // y[M, N] = x[M, K] · Wᵀ (+ bias) for an fp32 weight W [N, K] (ref::matmul_nt).
  virtual void matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                         float* y) const;
  // x ← GELU(x), tanh approximation (ATen's GeluKernel order on the reference backend).
  virtual void gelu_tanh_inplace(float* x, int64_t n) const;
  // The vision Conv3d patch embedding (kernel = stride): y[rows, w.out] = rows of x, each
  // [channels, taps] (taps = T·P·P), times the weight [out, channels·taps] (+ w.bias).
  // The reference follows oneDNN's convolution (ref::conv_patch_embed); others may treat it as
  // the linear it is.
  virtual void patch_embed(const LinearWeight& w, int64_t channels, const float* x, int64_t rows, float* y) const;
  // The joint head's work over all L rows (head_memory.h). The default runs on the host
  // (host_head_memory, with this backend's matmul_nt); a GPU backend keeps the memory resident.
  // `hidden` [L, spec.hidden_size] and the spec's weights must outlive the returned object.
  virtual std::unique_ptr<HeadMemory> head_memory(const HeadMemorySpec& spec, const float* hidden, int64_t L) const;
};

// fp32 reference kernels (never changes numerics; the oracle).
const Backend& reference_backend();
// The fastest backend this CPU supports for `precision` (exact -> reference).
const Backend& cpu_backend(Precision precision);

}  // namespace stave
