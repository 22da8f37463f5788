// The kernels a model runs on, and the memory they run in. The model code (src/model) is
// written once against this interface: the reference backend is plain fp32 loops (the oracle
// and `--precision exact`), the CPU backend (src/backends/cpu) overrides ops with vectorized,
// multithreaded kernels, and the CUDA backend (src/backends/cuda) runs them on the GPU. An op
// a backend does not override falls back to the reference implementation (the ref:: function
// named in the comment).
//
// Memory: every backend allocates tensors in its own memory (`empty`, `zeros`); the pointers
// the ops of the text model take (linear … attention_causal, add_inplace, split_query_gate)
// point into that memory — host memory for the CPU backends, device memory for CUDA. Copies
// between the host and a device happen only where the model asks for them (to_device,
// to_host, copy_from_host, copy_to_host); on the CPU backends they are no-ops or memcpy.
//
// The ops of the joint head and the vision tower (attention_dense, matmul_nt,
// gelu_tanh_inplace, patch_embed, head_memory) take host memory on every backend: those parts
// run on the host and hand their large products to the backend, which copies as it needs.
#pragma once
#include <cstdint>
#include <memory>

#include <span>
#include <vector>

#include "formats/linear_weight.h"
#include "ops/attention.h"
#include "ops/gated_delta_net.h"
#include "ops/head_memory.h"
#include "ops/tensor.h"
#include "stave/options.h"

namespace stave {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const { return "reference"; }

  // --- memory ---
  virtual Device device() const { return Device::kCpu; }
  // An uninitialised tensor in this backend's memory.
  virtual Tensor empty(Tensor::Shape shape, DType dtype = DType::kF32) const;
  Tensor zeros(Tensor::Shape shape, DType dtype = DType::kF32) const;
  virtual void fill_zero(const Tensor& t) const;
  // host [dst.bytes()] -> dst (in this backend's memory), and back.
  virtual void copy_from_host(const void* host, const Tensor& dst) const;
  virtual void copy_to_host(const Tensor& src, void* host) const;
  // src -> dst, both in this backend's memory, src.bytes() bytes (dst at least as large).
  virtual void copy(const Tensor& src, const Tensor& dst) const;
  // A host tensor in this backend's memory: the same tensor on a CPU backend (no copy).
  Tensor to_device(const Tensor& host) const;
  // An uninitialised host tensor for data on its way to this backend (to_device): plain host
  // memory by default; on a GPU, page-locked memory the backend reuses (no page faults on first
  // touch, copies at the bus's rate). Its storage may be handed out again once released.
  virtual Tensor host_staging(Tensor::Shape shape, DType dtype = DType::kF32) const;
  // A tensor of this backend as a host tensor: the same tensor on a CPU backend. A device
  // backend copies into host memory it may keep for reuse (page-locked on CUDA) and waits.
  virtual Tensor to_host(const Tensor& t) const;
  // Tokens per layer step the model should use for one sequence (0: the whole sequence).
  virtual int64_t preferred_step_tokens() const { return 0; }
  // Waits for the ops queued so far (a no-op where ops run synchronously).
  virtual void synchronize() const {}
  // Makes a linear weight resident in this backend's memory ahead of its first product (the
  // CPU backends use it in place from the mapped checkpoint; CUDA uploads it once).
  virtual void prepare(const LinearWeight& w) const {}
  // h[t] = row ids[t] of an embedding table [vocab = table.out, dim = table.in] in fp32, the
  // ids already checked to lie in the table; h [ids.size(), dim] in this backend's memory. The
  // default reads the rows on the host (into h where it is host memory, else through host
  // staging and copy_from_host); CUDA gathers them from a resident copy of the table.
  virtual void embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const;
  // Makes an embedding table ready for embedding_rows ahead of its first rows (a no-op where the
  // rows are read on the host).
  virtual void prepare_embedding(const LinearWeight& table) const {}

  // y[M, w.out] = x[M, w.in] · Wᵀ (+ bias); W4A4 activation quantization for MXFP4 weights.
  virtual void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const;
  // Several products over the same input: outs[i].y[M, outs[i].w.out] = x · Wᵢᵀ (+ bias), each
  // exactly as linear(outs[i].w, x, M, outs[i].y) computes it. The default calls linear for
  // each; a backend may quantize x once for the weights that share its W4A4 quantization. No
  // y may alias x.
  struct LinearOutput {
    const LinearWeight& w;
    float* y;
  };
  virtual void linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const;

  // --- norms (reference.h, gated_delta_net.h) ---
  // y = x / sqrt(mean(x²) + eps) · (1 + w) per row of dim (y may alias x).
  virtual void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                      float* y) const;
  // y = w ⊙ x / sqrt(mean(x²) + eps) · silu(z) per row of dim (ref::gated_rms_norm).
  virtual void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y) const;

  // --- element-wise (elementwise.h) ---
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* y) const;
  // SwiGLU's down projection: y[M, w.out] = linear(w, silu(gate) ⊙ up) for gate, up [M, w.in].
  // gate is scratch: the default writes silu_mul's product into it, then runs linear; CUDA's
  // fast FP8 path forms the product inside the activation quantization instead (same bits).
  virtual void silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const;
  virtual void sigmoid_mul(float* x, const float* gate, int64_t n) const;
  // The attention's output projection: y[M, w.out] = linear(w, x ⊙ sigmoid(gate)) for x, gate
  // [M, w.in]. x is scratch: the default writes sigmoid_mul's product into it, then runs linear;
  // CUDA's fast FP8 path forms the product inside the activation quantization (same bits).
  virtual void sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const;
  // The Gated DeltaNet's output projection: y[M, w.out] = linear(w, gated_rms_norm(x, z)) with
  // x, z [M, w.in] normed per head of dim values (norm_w [dim]). The default writes the norm
  // into scratch [M, w.in] (which must not alias x or z), then runs linear; CUDA's fast FP8 path
  // forms the norm inside the activation quantization (the same bits as its gated_rms_norm).
  virtual void gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim,
                                     const float* norm_w, float eps, float* scratch, int64_t M, float* y) const;
  // Whether sigmoid_mul_linear, gated_rms_norm_linear and add_rms_norm_linear_shared form the
  // element-wise part inside the products (false: they compose the ops, as the defaults do).
  // A profiler (StagedBackend) uses it to count the composed parts in their own stage.
  virtual bool forms_input_in_products() const { return false; }
  // h[i] += y[i] (the residual add, one fp32 rounding per element as torch's).
  virtual void add_inplace(float* h, const float* y, int64_t n) const;
  // qg [rows, 2d] (per head [q | gate]) -> q [rows, d], gate [rows, d].
  virtual void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const;

  // --- fused ops: each defaults to the composition of the ops above it names, so a backend
  // that does not override it keeps its numerics; CUDA fuses them into one kernel (fast
  // precision, or exact where the fused kernel is bit-identical to the composition) ---
  // h += y (add_inplace), then x = rms_norm_zero_centered(h) per row of dim: the residual add
  // and the norm that reads its sum. x must not alias h or y.
  virtual void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                          float eps, float* x) const;
  // h += y (none when y is null), x = rms_norm_zero_centered(h), then the products over x as
  // linear_shared_input(x, rows, outs) (each out's w.in == dim). x is scratch [rows, dim]: the
  // default writes the norm into it; CUDA's fast FP8 path forms the norm inside the products'
  // quantization (the same bits) and may leave x unwritten.
  virtual void add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                          float eps, float* x, std::span<const LinearOutput> outs) const;
  // The per-head norm and RoPE of the attention's queries or keys: tokens × heads rows of
  // head_dim. With gate == nullptr, x is [tokens, heads, head_dim] and y (which may alias x)
  // gets rms_norm_zero_centered then apply_rope. With a gate, x is the query projection
  // [tokens, heads, 2·head_dim] (per head [q | gate]): split_query_gate first, the gate halves
  // into gate, the normed and rotated queries into y.
  virtual void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w,
                              float eps, int64_t rotary_dim, const float* cos, const float* sin, float* y,
                              float* gate) const;

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
  // Packed sequences: in.tokens rows, sequence b holding rows [starts[b], starts[b + 1]) and
  // its own state states[b] (dims.state_floats() each). The default runs gated_delta_rule (or
  // the recurrence for a one-token sequence) on each; CUDA runs them side by side.
  virtual void gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in,
                                       std::span<const int64_t> starts, std::span<float* const> states,
                                       float* out) const;

  // --- full attention (rope.h, attention.h) ---
  virtual void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                          const float* cos, const float* sin) const;
  virtual void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                const float* k, const float* v, float* out) const;

  // --- vision tower and joint head (attention.h, head_ops.h, reference.h); host memory ---
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
  // `hidden` [L, spec.hidden_size] (host memory, or a GPU backend's own device memory) and the
  // spec's weights must outlive the returned object.
  virtual std::unique_ptr<HeadMemory> head_memory(const HeadMemorySpec& spec, HiddenRows hidden, int64_t L) const;

 protected:
  // embedding_rows' check of its output: an Error unless h is fp32 [ids, table.in] in shape.
  static void check_embedding_out(const LinearWeight& table, int64_t ids, const Tensor& h);
};

// fp32 reference kernels (never changes numerics; the oracle).
const Backend& reference_backend();

}  // namespace stave
