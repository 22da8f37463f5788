#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/device_ops.h"
#include "backends/cuda/gated_delta_chunk.h"
#include "stave/errors.h"
#include "util/env_choice.h"

namespace stave::cuda {
namespace {

// Device copies of an op's arguments, freed at scope end.
struct Staged {
  std::vector<DeviceBuffer> bufs;
  float* in(const float* host, int64_t n) {
    bufs.emplace_back();
    bufs.back().upload(host, static_cast<size_t>(n) * sizeof(float));
    return bufs.back().as<float>();
  }
  float* out(int64_t n) {
    bufs.emplace_back(static_cast<size_t>(n) * sizeof(float));
    return bufs.back().as<float>();
  }
};

float* as_f32(const Tensor& t) { return static_cast<float*>(t.raw()); }

void check_on_gpu(const Tensor& t, const char* what) {
  if (t.device() != Device::kCuda)
    throw Error(ErrorKind::kInternal, std::string("cuda ") + what + ": " + t.describe() + " is not in device memory");
}

}  // namespace

// Page-locked host buffers for to_host and host_staging, kept for reuse: a fresh pageable vector
// of the hidden states costs ~95 ms of page faults at 8192 tokens (168 MB); these are touched
// once, and copies from and to them run at the bus's rate.
class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  ~PinnedPool() {
    for (auto& [bytes, p] : free_) cudaFreeHost(p);
  }
  // A host tensor in a page-locked buffer of at least `bytes`; the buffer returns to the pool
  // when the last share of the tensor's storage goes.
  Tensor take(Tensor::Shape shape, DType dtype, size_t bytes) {
    void* p = nullptr;
    size_t have = 0;
    {
      std::lock_guard lock(mutex_);
      // The smallest free buffer that fits.
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
      if (best != free_.end()) {
        have = best->first;
        p = best->second;
        free_.erase(best);
      }
    }
    if (!p) {
      have = std::max<size_t>(bytes, 1);
      STAVE_CUDA_CHECK(cudaMallocHost(&p, have));
    }
    std::weak_ptr<PinnedPool> pool = weak_from_this();
    std::shared_ptr<void> storage(p, [pool, have](void* q) {
      if (auto live = pool.lock()) {
        live->give_back(q, have);
      } else {
        cudaFreeHost(q);
      }
    });
    return Tensor(std::move(storage), p, std::move(shape), dtype, Device::kCpu);
  }

 private:
  void give_back(void* p, size_t bytes) {
    std::lock_guard lock(mutex_);
    free_.emplace_back(bytes, p);
    // At most four idle buffers: the longest idle go first. (Freeing the largest first would
    // free the very buffers a forward of the same length takes again — its rows, RoPE tables
    // and hidden states come back together — and page-lock them anew every time.)
    while (free_.size() > 4) {
      cudaFreeHost(free_.front().second);
      free_.erase(free_.begin());
    }
  }
  std::mutex mutex_;
  std::vector<std::pair<size_t, void*>> free_;  // in the order they came back
};

namespace {

// Whether `p` is page-locked host memory (cudaMallocHost / cudaHostRegister).
bool page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not a pointer CUDA knows: pageable
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace

bool fused_input_from_env() {
  return env_choice<bool>("STAVE_CUDA_FUSED_INPUT", {{"on", true}, {"off", false}});
}

EmbedRows embed_rows_from_env() {
  return env_choice<EmbedRows>("STAVE_CUDA_EMBED",
                               {{"rows", EmbedRows::kRows}, {"device", EmbedRows::kDevice}, {"host", EmbedRows::kHost}});
}

CudaBackend::CudaBackend(Precision precision, CudaBackendOptions options)
    : precision_(precision),
      fused_input_(fused_input_from_env()),
      embed_rows_(embed_rows_from_env()),
      fp8_weights_(options.fp8_weights.value_or(fp8_weights_from_env())),
      fp8_cache_{options.fp8_cache_bytes},
      options_(options),
      ctx_(std::make_shared<GpuContext>(precision == Precision::kExact,
                                        options.attention_kernel.value_or(attention_kernel_from_env()))),
      pinned_(std::make_shared<PinnedPool>()),
      qk_(std::make_unique<DeviceBuffer>()),
      starts_(std::make_unique<DeviceBuffer>()),
      ids_(std::make_unique<DeviceBuffer>()),
      rows_(std::make_unique<DeviceBuffer>()),
      matmul_x_(std::make_unique<DeviceBuffer>()),
      matmul_y_(std::make_unique<DeviceBuffer>()) {
  // Freed blocks stay in the device's pool for the next forward instead of going back to the
  // driver at every synchronisation.
  int device = 0;
  STAVE_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool;
  STAVE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  STAVE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}
CudaBackend::~CudaBackend() {
  if (rows_copied_) {
    cudaEventSynchronize(rows_copied_);
    cudaEventDestroy(rows_copied_);
  }
}

// --- memory ---

Tensor CudaBackend::empty(Tensor::Shape shape, DType dtype) const {
  Tensor probe(nullptr, nullptr, shape, dtype, Device::kCuda);
  const size_t bytes = std::max<size_t>(probe.bytes(), 16);
  void* p = nullptr;
  std::shared_ptr<GpuContext> ctx = ctx_;
  STAVE_CUDA_CHECK(cudaMallocAsync(&p, bytes, ctx->stream()));
  std::shared_ptr<void> storage(p, [ctx](void* q) { cudaFreeAsync(q, ctx->stream()); });
  return Tensor(std::move(storage), p, std::move(shape), dtype, Device::kCuda);
}

void CudaBackend::fill_zero(const Tensor& t) const {
  check_on_gpu(t, "fill_zero");
  if (t.bytes()) STAVE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), ctx_->stream()));
}

// A copy from pageable host memory is staged before cudaMemcpyAsync returns, so the caller may
// reuse its buffer at once; the kernels after it on the stream see the data. One from
// page-locked memory (host_staging) runs later, from the buffer itself: it is waited for, so the
// same holds.
void CudaBackend::copy_from_host(const void* host, const Tensor& dst) const {
  check_on_gpu(dst, "copy_from_host");
  if (!dst.bytes()) return;
  STAVE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), host, dst.bytes(), cudaMemcpyHostToDevice, ctx_->stream()));
  if (page_locked(host)) ctx_->synchronize();
}

Tensor CudaBackend::host_staging(Tensor::Shape shape, DType dtype) const {
  Tensor probe(nullptr, nullptr, shape, dtype, Device::kCpu);
  return pinned_->take(std::move(shape), dtype, probe.bytes());
}

void CudaBackend::copy_to_host(const Tensor& src, void* host) const {
  check_on_gpu(src, "copy_to_host");
  if (src.bytes()) STAVE_CUDA_CHECK(cudaMemcpyAsync(host, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()));
  ctx_->synchronize();
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) const {
  check_on_gpu(src, "copy");
  check_on_gpu(dst, "copy");
  if (src.bytes() > dst.bytes())
    throw Error(ErrorKind::kInternal, "copy of " + src.describe() + " into the smaller " + dst.describe());
  if (src.bytes())
    STAVE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, ctx_->stream()));
}

Tensor CudaBackend::to_host(const Tensor& t) const {
  check_on_gpu(t, "to_host");
  Tensor host = pinned_->take(t.shape(), t.dtype(), t.bytes());
  if (t.bytes()) STAVE_CUDA_CHECK(cudaMemcpyAsync(host.raw(), t.raw(), t.bytes(), cudaMemcpyDeviceToHost, ctx_->stream()));
  ctx_->synchronize();
  return host;
}

void CudaBackend::synchronize() const { ctx_->synchronize(); }

void CudaBackend::prepare(const LinearWeight& w) const {
  std::lock_guard lock(mutex_);
  resident(w);
}

namespace {
bool gathers(const LinearWeight& table) {
  return table.format == WeightFormat::kBF16 || table.format == WeightFormat::kF16 ||
         table.format == WeightFormat::kF32;
}
}  // namespace

void CudaBackend::prepare_embedding(const LinearWeight& table) const {
  if (embed_rows_ != EmbedRows::kDevice || !gathers(table)) return;
  std::lock_guard lock(mutex_);
  resident(table);
}

void CudaBackend::embedding_rows(const LinearWeight& table, std::span<const int32_t> ids, const Tensor& h) const {
  if (embed_rows_ == EmbedRows::kHost || !gathers(table)) return Backend::embedding_rows(table, ids, h);
  const int64_t L = static_cast<int64_t>(ids.size());
  check_on_gpu(h, "embedding_rows");
  check_embedding_out(table, L, h);
  if (L == 0) return;
  if (embed_rows_ == EmbedRows::kDevice) {
    std::lock_guard lock(mutex_);
    const DeviceLinear& d = resident(table);
    // From pageable memory: staged before the call returns, so `ids` may go.
    ids_->reserve(ids.size_bytes());
    STAVE_CUDA_CHECK(
        cudaMemcpyAsync(ids_->as<void>(), ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice, ctx_->stream()));
    if (!dev::embedding_rows(d.data.as<void>(), d.format, d.in, ids_->as<int32_t>(), L, h.data<float>(),
                             ctx_->stream()))
      throw Error(ErrorKind::kInternal, "embedding_rows: no GPU gather for the table " + table.name);
    return;
  }
  // The stored rows, gathered into page-locked memory, go up in one copy and are widened there.
  // The call returns without waiting for the copy (the host goes on, e.g. to the RoPE tables):
  // the page-locked rows stay held until the copy's event has passed.
  const size_t row_bytes = table.row_bytes(), bytes = static_cast<size_t>(L) * row_bytes;
  const Tensor staged = host_staging({static_cast<int64_t>(bytes)}, DType::kU8);
  uint8_t* dst = staged.data<uint8_t>();
  const auto* src = static_cast<const uint8_t*>(table.data);
#pragma omp parallel for schedule(static) if (L > 256)
  for (int64_t t = 0; t < L; ++t) std::memcpy(dst + t * row_bytes, src + ids[t] * row_bytes, row_bytes);
  std::lock_guard lock(mutex_);
  if (!rows_copied_) STAVE_CUDA_CHECK(cudaEventCreateWithFlags(&rows_copied_, cudaEventDisableTiming));
  STAVE_CUDA_CHECK(cudaEventSynchronize(rows_copied_));  // the last call's copy (rows_ is reused)
  rows_staged_ = Tensor();
  rows_->reserve(bytes);
  STAVE_CUDA_CHECK(cudaMemcpyAsync(rows_->as<void>(), dst, bytes, cudaMemcpyHostToDevice, ctx_->stream()));
  STAVE_CUDA_CHECK(cudaEventRecord(rows_copied_, ctx_->stream()));
  rows_staged_ = staged;
  if (!dev::embedding_rows(rows_->as<void>(), table.format, table.in, nullptr, L, h.data<float>(), ctx_->stream()))
    throw Error(ErrorKind::kInternal, "embedding_rows: no GPU widening for the table " + table.name);
}

const DeviceLinear& CudaBackend::resident(const LinearWeight& w) const {
  const auto key = std::make_tuple(w.data, static_cast<const void*>(w.scales), static_cast<const void*>(w.bias), w.out,
                                   w.in, static_cast<int>(w.format), w.quantize_input,
                                   static_cast<int>(w.input_scale_mode));
  auto it = weights_.find(key);
  if (it == weights_.end())
    it = weights_
             .emplace(key, std::make_unique<DeviceLinear>(
                           upload_linear(w, precision_ == Precision::kFast, fp8_weights_, &fp8_cache_)))
             .first;
  return *it->second;
}

// --- the text model's ops: device pointers, queued on the stream ---

void CudaBackend::linear(const LinearWeight& w, const float* x, int64_t M, float* y) const {
  if (M <= 0) return;
  std::lock_guard lock(mutex_);
  dev::linear(*ctx_, resident(w), x, M, y);
}

void CudaBackend::silu_mul_linear(const LinearWeight& w, float* gate, const float* up, int64_t M, float* y) const {
  if (M <= 0) return;
  {  // on in every mode (measured and tested on the GPU since f62c28d)
    std::lock_guard lock(mutex_);
    if (dev::silu_mul_linear_fused(*ctx_, resident(w), gate, up, M, y)) return;
  }
  Backend::silu_mul_linear(w, gate, up, M, y);  // silu_mul, then linear
}

void CudaBackend::sigmoid_mul_linear(const LinearWeight& w, float* x, const float* gate, int64_t M, float* y) const {
  if (M <= 0) return;
  if (formed_linear(w, x, {dev::Prologue::kSigmoidGate, gate}, M, y)) return;
  Backend::sigmoid_mul_linear(w, x, gate, M, y);
}

void CudaBackend::gated_rms_norm_linear(const LinearWeight& w, const float* x, const float* z, int64_t dim,
                                        const float* norm_w, float eps, float* scratch, int64_t M, float* y) const {
  if (M <= 0) return;
  // Heads of 8 · lanes values (lanes a power of two ≤ 32): the quantization's grouped norm.
  if (dim % 8 == 0 && formed_linear(w, x, {dev::Prologue::kGatedNorm, z, norm_w, static_cast<int>(dim / 8), eps}, M, y))
    return;
  Backend::gated_rms_norm_linear(w, x, z, dim, norm_w, eps, scratch, M, y);
}

void CudaBackend::add_rms_norm_linear_shared(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                             float eps, float* x, std::span<const LinearOutput> outs) const {
  if (rows <= 0) return;
  if (fused_input_) {
    std::lock_guard lock(mutex_);
    if (dev::add_rms_norm_shared_fused(*ctx_, h, y, rows, dim, w, eps, x, device_products(outs))) return;
  }
  Backend::add_rms_norm_linear_shared(h, y, rows, dim, w, eps, x, outs);
}

bool CudaBackend::formed_linear(const LinearWeight& w, const float* x, const dev::RowPrologue& pro, int64_t M,
                                float* y) const {
  if (!fused_input_) return false;
  std::lock_guard lock(mutex_);
  return dev::formed_linear_fused(*ctx_, resident(w), x, pro, M, y);
}

void CudaBackend::linear_shared_input(const float* x, int64_t M, std::span<const LinearOutput> outs) const {
  if (M <= 0) return;
  std::lock_guard lock(mutex_);
  dev::linear_shared_input(*ctx_, x, M, device_products(outs));
}

std::vector<dev::SharedProduct> CudaBackend::device_products(std::span<const LinearOutput> outs) const {
  std::vector<dev::SharedProduct> products;
  products.reserve(outs.size());
  for (const LinearOutput& o : outs) products.push_back({&resident(o.w), o.y});
  return products;
}

void CudaBackend::rms_norm_zero_centered(const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                                         float* y) const {
  if (rows <= 0) return;
  if (precision_ == Precision::kExact)
    dev::rms_norm_zero_centered(x, rows, dim, w, eps, y, ctx_->stream());
  else
    dev::rms_norm_zero_centered_fast(x, rows, dim, w, eps, y, ctx_->stream(), fused_input_);
}

void CudaBackend::gated_rms_norm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                                 float* y) const {
  if (rows <= 0) return;
  if (precision_ == Precision::kExact)
    dev::gated_rms_norm(x, z, rows, dim, w, eps, y, ctx_->stream());
  else
    dev::gated_rms_norm_fast(x, z, rows, dim, w, eps, y, ctx_->stream(), fused_input_);
}

void CudaBackend::silu_mul(const float* gate, const float* up, int64_t n, float* y) const {
  if (n <= 0) return;
  if (precision_ == Precision::kExact)
    dev::silu_mul(gate, up, n, y, ctx_->stream());
  else
    dev::silu_mul_fast(gate, up, n, y, ctx_->stream());
}

void CudaBackend::sigmoid_mul(float* x, const float* gate, int64_t n) const {
  if (n <= 0) return;
  if (precision_ == Precision::kExact)
    dev::sigmoid_mul(x, gate, n, ctx_->stream());
  else
    dev::sigmoid_mul_fast(x, gate, n, ctx_->stream());
}

void CudaBackend::add_inplace(float* h, const float* y, int64_t n) const {
  if (n > 0) dev::add_inplace_vec(h, y, n, ctx_->stream());  // one fp32 add: both precisions
}

void CudaBackend::split_query_gate(const float* qg, int64_t rows, int64_t d, float* q, float* gate) const {
  if (rows > 0) dev::split_query_gate(qg, rows, d, q, gate, ctx_->stream());
}

void CudaBackend::causal_conv1d_silu(const float* x, int64_t tokens, int64_t channels, const float* weight,
                                     int64_t kernel, float* history, float* y) const {
  if (tokens <= 0) return;
  if (precision_ == Precision::kExact)
    dev::causal_conv1d_silu(x, tokens, channels, weight, kernel, history, y, ctx_->stream());
  else
    dev::causal_conv1d_silu_fast(x, tokens, channels, weight, kernel, history, y, ctx_->stream());
}

void CudaBackend::add_rms_norm_zero_centered(float* h, const float* y, int64_t rows, int64_t dim, const float* w,
                                             float eps, float* x) const {
  // The exact kernel is bit-identical to add_inplace + rms_norm_zero_centered: both precisions fuse.
  if (rows > 0) dev::add_rms_norm_zero_centered(h, y, rows, dim, w, eps, x, precision_ == Precision::kExact, ctx_->stream(),
                                               fused_input_);
}

void CudaBackend::head_norm_rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const float* w,
                                 float eps, int64_t rotary_dim, const float* cos, const float* sin, float* y,
                                 float* gate) const {
  if (tokens <= 0) return;
  // Exact precision keeps the composition of its exact kernels (fp64 RoPE products).
  if (precision_ == Precision::kExact)
    return Backend::head_norm_rope(x, tokens, heads, head_dim, w, eps, rotary_dim, cos, sin, y, gate);
  dev::head_norm_rope(x, tokens, heads, head_dim, w, eps, rotary_dim, cos, sin, y, gate, ctx_->stream());
}

void CudaBackend::gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t tokens,
                            int64_t n_v, float* g, float* beta) const {
  if (tokens > 0) dev::gdn_gates(a, b, A_log, dt_bias, tokens, n_v, g, beta, ctx_->stream());
}

void CudaBackend::gated_delta_rule(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                   float* out) const {
  if (in.tokens <= 0) return;
  std::lock_guard lock(mutex_);
  // Fast precision: the chunk form on tensor cores where it takes the shapes (gated_delta_chunk.h).
  if (precision_ == Precision::kFast && dev::gated_delta_chunk_applies(dims, in.tokens, 1)) {
    const int64_t starts[2] = {0, in.tokens};
    return dev::gated_delta_rule_chunked(dims, in, starts, state, out, ctx_->stream());
  }
  dev::gated_delta_rule(dims, in, state, out, *qk_, precision_ == Precision::kExact, ctx_->stream());
}

void CudaBackend::gated_delta_rule_recurrent(const GatedDeltaDims& dims, const GatedDeltaInput& in, float* state,
                                             float* out) const {
  if (in.tokens <= 0) return;
  std::lock_guard lock(mutex_);
  dev::gated_delta_rule(dims, in, state, out, *qk_, precision_ == Precision::kExact, ctx_->stream());
}

void CudaBackend::gated_delta_rule_packed(const GatedDeltaDims& dims, const GatedDeltaInput& in,
                                          std::span<const int64_t> starts, std::span<float* const> states,
                                          float* out) const {
  if (states.size() + 1 != starts.size())
    throw Error(ErrorKind::kInternal, "packed delta rule: " + std::to_string(states.size()) + " states for " +
                                          std::to_string(starts.size()) + " row offsets");
  if (in.tokens <= 0 || starts.size() < 2) return;
  if (starts.size() == 2) return gated_delta_rule(dims, in, states[0], out);
  // The kernel runs the sequences side by side over one block of states: gather the
  // sequences' states into it, run, and scatter them back (device-to-device copies).
  const int64_t n_seq = static_cast<int64_t>(states.size());
  const size_t state_bytes = static_cast<size_t>(dims.state_floats()) * sizeof(float);
  const Tensor block = empty({n_seq, dims.state_floats()});
  cudaStream_t s = ctx_->stream();
  for (int64_t b = 0; b < n_seq; ++b)
    STAVE_CUDA_CHECK(cudaMemcpyAsync(as_f32(block) + b * dims.state_floats(), states[b], state_bytes,
                                     cudaMemcpyDeviceToDevice, s));
  std::lock_guard lock(mutex_);
  // The offsets go up from pageable memory: staged before the call returns (see copy_from_host).
  const size_t bytes = starts.size() * sizeof(int64_t);
  starts_->reserve(bytes);
  STAVE_CUDA_CHECK(cudaMemcpyAsync(starts_->as<void>(), starts.data(), bytes, cudaMemcpyHostToDevice, ctx_->stream()));
  if (precision_ == Precision::kFast && dev::gated_delta_chunk_applies(dims, in.tokens, n_seq))
    dev::gated_delta_rule_chunked(dims, in, starts, as_f32(block), out, s);
  else
    dev::gated_delta_rule(dims, in, as_f32(block), out, *qk_, precision_ == Precision::kExact, s,
                          starts_->as<int64_t>(), n_seq);
  for (int64_t b = 0; b < n_seq; ++b)
    STAVE_CUDA_CHECK(cudaMemcpyAsync(states[b], as_f32(block) + b * dims.state_floats(), state_bytes,
                                     cudaMemcpyDeviceToDevice, s));
}

void CudaBackend::apply_rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim,
                             const float* cos, const float* sin) const {
  if (tokens > 0) dev::apply_rope(x, tokens, heads, head_dim, rotary_dim, cos, sin, ctx_->stream());
}

void CudaBackend::attention_causal(const AttentionShape& shape, const float* q, int64_t tokens, int64_t q_pos0,
                                   const float* k, const float* v, float* out) const {
  if (tokens <= 0) return;
  std::lock_guard lock(mutex_);
  dev::attention_causal(*ctx_, shape, q, tokens, q_pos0, k, v, out, options_.attention_score_bytes);
}

// --- the head's products: host memory in and out ---

std::pair<const float*, const float*> CudaBackend::resident_matrix(const float* w, const float* bias, int64_t N,
                                                                  int64_t K) const {
  const auto key = std::make_tuple(w, bias, N, K);
  auto it = matmul_weights_.find(key);
  if (it == matmul_weights_.end()) {
    auto dwb = std::make_unique<DeviceBuffer>(), dbb = std::make_unique<DeviceBuffer>();
    dwb->upload(w, static_cast<size_t>(N * K) * sizeof(float));
    if (bias) dbb->upload(bias, static_cast<size_t>(N) * sizeof(float));
    it = matmul_weights_.emplace(key, std::make_pair(std::move(dwb), std::move(dbb))).first;
  }
  return {it->second.first->as<float>(), bias ? it->second.second->as<float>() : nullptr};
}

void CudaBackend::matmul_nt(const float* x, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
                            float* y) const {
  if (M <= 0 || N <= 0) return;
  std::lock_guard lock(mutex_);
  Staged st;
  const float* dw;
  const float* db = nullptr;
  if (options_.keep_matmul_weights) {
    std::tie(dw, db) = resident_matrix(w, bias, N, K);
  } else {
    dw = st.in(w, N * K);
    if (bias) db = st.in(bias, N);
  }
  // Stream-ordered copies (a pageable x is staged before its copy returns; the previous call's
  // kernels are done with matmul_x_, each call ends waiting for its own): no device-wide wait.
  matmul_x_->reserve(static_cast<size_t>(M * K) * sizeof(float));
  matmul_y_->reserve(static_cast<size_t>(M * N) * sizeof(float));
  STAVE_CUDA_CHECK(cudaMemcpyAsync(matmul_x_->as<float>(), x, static_cast<size_t>(M * K) * sizeof(float),
                                   cudaMemcpyHostToDevice, ctx_->stream()));
  dev::matmul_nt(*ctx_, matmul_x_->as<float>(), M, K, dw, N, db, matmul_y_->as<float>());
  STAVE_CUDA_CHECK(cudaMemcpyAsync(y, matmul_y_->as<float>(), static_cast<size_t>(M * N) * sizeof(float),
                                   cudaMemcpyDeviceToHost, ctx_->stream()));
  ctx_->synchronize();
}

}  // namespace stave::cuda
