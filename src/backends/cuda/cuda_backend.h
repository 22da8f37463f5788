// The CUDA backend behind the same Backend interface as the CPU one: tensors live in device
// memory (stream-ordered cudaMallocAsync from the device's pool, so freeing and reallocating
// per forward costs no synchronisation), the text model's ops take device pointers and queue
// their kernels (src/backends/cuda/device_ops.h) on one stream without waiting; only to_host
// and copy_to_host wait. Linear weights are uploaded once (prepare, or on first use) and stay
// resident (MXFP4 packed). The head ops (matmul_nt, head_memory) take host memory, as the
// Backend interface says, and copy; head_memory also reads hidden states lent in device memory.
#pragma once
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "backends/cuda/attention_kernel.h"
#include "backends/cuda/fp8_weights.h"
#include "ops/backend.h"

struct CUevent_st;  // cudaEvent_t's pointee, declared as the CUDA runtime does

namespace stave::cuda {

class GpuContext;
struct DeviceLinear;
class DeviceBuffer;
class PinnedPool;
namespace dev {
struct RowPrologue;
struct SharedProduct;
}

// STAVE_CUDA_FUSED_INPUT: unset or "on" (the default) forms the norm or gate before a projection
// inside its FP8 input quantization (sigmoid_mul_linear, gated_rms_norm_linear,
// add_rms_norm_linear_shared) and runs the standalone fast norms in the same grouped layout;
// "off" composes the ops with the earlier norm kernels (SwiGLU's fused product,
// silu_mul_linear, is on either way); anything else is an Error naming the variable.
bool fused_input_from_env();

// STAVE_CUDA_EMBED, where the embedding rows of a forward are read: unset or "rows" (the default
// since 2026-12-07) has the host gather the ids' rows as stored (BF16: 2 bytes per value), send
// them in one copy and widen them to fp32 on the GPU; "device" gathers them on the GPU from a copy
// of the whole table kept there (+ the table's bytes of GPU memory: 2.4 GiB for Clef 27B's BF16
// table); "host" widens them on the host and sends the fp32 rows, as before (twice the bytes over
// PCIe, written by the host first); anything else is an Error naming the variable. On an H100
// (2026-12-07), the 27B's backbone at 8192 tokens: host 570.9 ms, rows 567.6, device 566.2 (GPU
// memory 16.9 → 19.2 GiB).
enum class EmbedRows { kRows, kDevice, kHost };
EmbedRows embed_rows_from_env();

struct CudaBackendOptions {
  // matmul_nt weights stay resident on the GPU, keyed by address and shape. Only for weights
  // whose memory never changes while the backend lives (the engine's joint head).
  bool keep_matmul_weights = false;
  // Score buffer budget of attention_causal (tests make it small to exercise the chunking).
  size_t attention_score_bytes = size_t{512} << 20;
  // Which kernel runs fast attention (tests pin each); unset, STAVE_CUDA_ATTENTION decides.
  std::optional<AttentionKernel> attention_kernel;
  // Whether fast precision keeps each MXFP4 weight's FP8 expansion resident (device_ops.h,
  // Fp8Weights); unset, STAVE_CUDA_FP8_WEIGHTS decides.
  std::optional<Fp8Weights> fp8_weights;
  // With kResident: at most this many bytes of kept copies, in upload order (Fp8Cache); < 0: as
  // many as device memory holds.
  int64_t fp8_cache_bytes = -1;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(Precision precision, CudaBackendOptions options = {});
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }

  Device device() const override { return Device::kCuda; }
  Tensor empty(Tensor::Shape shape, DType dtype = DType::kF32) const override;
  void fill_zero(const Tensor& t) const override;
  void copy_from_host(const void* host, const Tensor& dst) const override;
  void copy_to_host(const Tensor& src, void* host) const override;
  void copy(const Tensor& src, const Tensor& dst) const override;
  Tensor to_host(const Tensor& t) const override;
  Tensor host_staging(Tensor::Shape shape, DType dtype = DType::kF32) const override;
  void synchronize() const override;
  void prepare(const LinearWeight& w) const override;
  // By STAVE_CUDA_EMBED (EmbedRows): the stored rows gathered on the host and widened on the GPU,
  // or gathered on the GPU from the table kept resident (uploaded by prepare_embedding), or (host,
  // or a table format the GPU does not widen: MXFP4) widened on the host as the default does.
  void prepare_embedding(const LinearWeight& table) const override;
  void embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const override;

  void linear(const LinearWeight& w, const float* x, int64_t M, float* y) const override;
  // One W4A4 quantization of x for the FP8 products that share it (dev::linear_shared_input).
  void linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const override;
  // Fast FP8 path: the SiLU·up product inside the quantization (dev::formed_linear_fused).
  void silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const override;
  // Fast FP8 path: the output gate, or the gated RMSNorm, inside the quantization
  // (dev::formed_linear_fused); elsewhere the default composition.
  void sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const override;
  // Fast FP8 path: the norm inside the first product's quantization (dev::add_rms_norm_shared_fused).
  void add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x, std::span<const LinearOutput> outs) const override;
  // Fast precision unless STAVE_CUDA_FUSED_INPUT=off (where a shape or path does not take the fused
  // form, the op still composes: the profile then counts that part as linear work).
  bool forms_input_in_products() const override { return fused_input_ && precision_ == Precision::kFast; }
  void gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim, const float* norm_w,
                             float eps, float* scratch, int64_t M, float* y) const override;
  void rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y) const override;
  void gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                      float* y) const override;
  void silu_mul(const float* gate, const float* up, int64_t n, float* y) const override;
  void sigmoid_mul(float* x, const float* gate, int64_t n) const override;
  void add_inplace(float* h, const float* y, int64_t n) const override;
  void split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const override;
  void add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w, float eps,
                                  float* x) const override;
  void head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w, float eps,
                      int64_t rotary_dim, const float* cos, const float* sin, float* y, float* gate) const override;
  void causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight, int64_t kernel,
                          float* history, float* y) const override;
  void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                 int64_t n_v, float* g, float* beta) const override;
  void gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                        float* out) const override;
  void gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                  float* out) const override;
  void gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in, std::span<const int64_t> starts,
                               std::span<float* const> states, float* out) const override;
  void apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
                  const float* sin) const override;
  void attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0, const float* k,
                        const float* v, float* out) const override;
  void matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                 float* y) const override;
  // Fast precision with keep_matmul_weights: the memory, its projections and attentions stay on
  // the GPU (cuda_head_memory.cpp); otherwise the host implementation over this backend's ops.
  std::unique_ptr<HeadMemory> head_memory(const HeadMemorySpec& spec, HiddenRows hidden,
                                          int64_t L) const override;

 private:
  friend class CudaHeadMemory;
  const DeviceLinear& resident(const LinearWeight& w) const;
  // The resident weights and outputs of products over one input (call with mutex_ held).
  std::vector<dev::SharedProduct> device_products(std::span<const LinearOutput> outs) const;
  // dev::formed_linear_fused under the lock: false where the fused path does not apply.
  bool formed_linear(const LinearWeight& w, const float* x, const dev::RowPrologue& pro, int64_t M, float* y) const;
  // Device copies of an fp32 matmul_nt weight [N, K] and its bias (nullptr without), uploaded
  // on first use and kept (keep_matmul_weights). Caller holds mutex_.
  std::pair<const float*, const float*> resident_matrix(const float* w, const float* bias, int64_t N, int64_t K) const;

  Precision precision_;
  bool fused_input_;  // STAVE_CUDA_FUSED_INPUT
  EmbedRows embed_rows_;  // STAVE_CUDA_EMBED
  Fp8Weights fp8_weights_;
  mutable Fp8Cache fp8_cache_;  // the kept copies' budget (fp8_weights_ kResident); under mutex_
  CudaBackendOptions options_;
  mutable std::mutex mutex_;  // one op at a time on the shared context and caches
  // Shared with the deleters of the tensors this backend allocates (they free on its stream).
  std::shared_ptr<GpuContext> ctx_;
  std::shared_ptr<PinnedPool> pinned_;           // page-locked host memory for to_host
  mutable std::unique_ptr<DeviceBuffer> qk_;     // the delta rule's normalised q and k
  mutable std::unique_ptr<DeviceBuffer> starts_;  // packed sequences' row offsets
  mutable std::unique_ptr<DeviceBuffer> ids_;     // embedding_rows' token ids (EmbedRows::kDevice)
  mutable std::unique_ptr<DeviceBuffer> rows_;    // embedding_rows' stored rows (EmbedRows::kRows)
  // The page-locked rows of the last embedding_rows (kRows) and the event of their copy: kept
  // until the copy is done, so that the call need not wait for it (the next call, or the
  // backend's end, does). Under mutex_.
  mutable Tensor rows_staged_;
  mutable ::CUevent_st* rows_copied_ = nullptr;  // a cudaEvent_t (no CUDA header here)
  // Keyed by everything that describes the weight (pointers, shape, format): the memory of a
  // LinearWeight must stay unchanged while this backend lives (model weights are mapped once).
  mutable std::map<std::tuple<const void*, const void*, const void*, int64_t, int64_t, int, bool, int>,
                   std::unique_ptr<DeviceLinear>>
      weights_;
  mutable std::map<std::tuple<const float*, const float*, int64_t, int64_t>,
                   std::pair<std::unique_ptr<DeviceBuffer>, std::unique_ptr<DeviceBuffer>>>
      matmul_weights_;  // weight, bias (keep_matmul_weights)
  mutable std::unique_ptr<DeviceBuffer> matmul_x_, matmul_y_;  // reused across calls
};

}  // namespace stave::cuda
