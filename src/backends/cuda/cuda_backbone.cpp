#include "backends/cuda/cuda_backbone.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "backends/cuda/device_ops.h"
#include "formats/tensor_names.h"
#include "ops/reference.h"
#include "ops/rope.h"
#include "formats/quark_config.h"
#include "util/stage_timer.h"

namespace stave::cuda {
namespace {

DeviceBuffer upload_floats(const std::vector<float>& v) {
  DeviceBuffer b;
  b.upload(v.data(), v.size() * sizeof(float));
  return b;
}

struct DeltaNetWeights {
  GatedDeltaDims dims;
  int64_t key_dim = 0, value_dim = 0, conv_dim = 0, kernel = 0;
  DeviceLinear qkv, z, b, a, out;
  DeviceBuffer conv_weight, A_log, dt_bias, norm_weight;
};

struct AttentionWeights {
  AttentionShape shape;
  DeviceLinear q, k, v, o;
  DeviceBuffer q_norm, k_norm;
};

struct LayerWeights {
  LayerType type = LayerType::kLinearAttention;
  DeviceBuffer input_norm, post_norm;
  std::unique_ptr<DeltaNetWeights> deltanet;
  std::unique_ptr<AttentionWeights> attention;
  DeviceLinear gate, up, down;
};

size_t linear_bytes(const DeviceLinear& l) { return l.data.bytes() + l.scales.bytes() + l.bias.bytes(); }

}  // namespace

struct CudaBackbone::Impl {
  TextConfig cfg;
  bool exact = false;
  float eps = 0;
  RopeSpec rope;
  LinearWeight embed;
  std::vector<LayerWeights> layers;
  DeviceBuffer final_norm;
  size_t weight_bytes = 0;

  // Activations and scratch, grown to the longest sequence seen (decisions run one at a time).
  mutable std::mutex mutex;
  mutable std::unique_ptr<GpuContext> ctx;
  mutable DeviceBuffer h, x, y, big1, big2, z, a, b, g, beta, conv, core, q, gate, K, V, history, state, cos, sin, qk,
      starts;

  void add(const DeviceLinear& l) { weight_bytes += linear_bytes(l); }

  // Host staging for the embeddings and angles in and the hidden states out: page-locked, two
  // slots; a slot stays taken while its hidden states are lent out. A prefill takes whichever
  // slot is free (waiting only while both are lent), so a caller that still holds one lease can
  // always run another prefill once the other slot's holder lets go.
  mutable std::array<PinnedBuffer, 2> staging;
  mutable std::array<bool, 2> staging_lent{false, false};
  mutable std::mutex staging_mutex;
  mutable std::condition_variable staging_freed;
  // A free staging slot, marked lent until the returned hold is dropped.
  std::pair<size_t, std::shared_ptr<void>> take_staging() const {
    std::unique_lock lock(staging_mutex);
    size_t slot = 0;
    staging_freed.wait(lock, [&] {
      for (slot = 0; slot < staging_lent.size(); ++slot)
        if (!staging_lent[slot]) return true;
      return false;
    });
    staging_lent[slot] = true;
    std::shared_ptr<void> hold(new size_t(slot), [this](size_t* s) {
      {
        std::lock_guard l(staging_mutex);
        staging_lent[*s] = false;
      }
      staging_freed.notify_one();
      delete s;
    });
    return {slot, std::move(hold)};
  }
  // cos/sin rows of positions 0 … rope_rows − 1 (text positions), grown on demand.
  mutable std::vector<float> rope_cos, rope_sin;
  mutable int64_t rope_rows = 0;
  void extend_rope_table(int64_t rows) const {
    if (rows <= rope_rows) return;
    const int64_t half = rope.half();
    std::vector<int32_t> pos(static_cast<size_t>(rows - rope_rows));
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(rope_rows + static_cast<int64_t>(i));
    rope_cos.resize(static_cast<size_t>(rows * half));
    rope_sin.resize(static_cast<size_t>(rows * half));
    ref::mrope_cos_sin(rope, pos.data(), pos.data(), pos.data(), rows - rope_rows, rope_cos.data() + rope_rows * half,
                       rope_sin.data() + rope_rows * half);
    rope_rows = rows;
  }
};

CudaBackbone::CudaBackbone(const Release& release, Precision precision) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  // The CPU Backbone validates the config and the tensor shapes (it binds without copying).
  const Backbone check(release, reference_backend());
  const TextConfig& t = release.config.text;
  const TensorStore& ws = release.weights;
  m.cfg = t;
  m.exact = precision == Precision::kExact;
  m.eps = static_cast<float>(t.rms_norm_eps);
  m.rope.rotary_dim = t.rotary_dim();
  m.rope.theta = t.rope_theta;
  m.rope.mrope_section = t.mrope_section;
  m.ctx = std::make_unique<GpuContext>(m.exact, attention_kernel_from_env());
  // Which linears are MXFP4 and how their inputs are quantized: the release's quantization
  // plan, resolved per layer exactly as the CPU Backbone binds them.
  const std::optional<quant::QuantPlan> plan = quant::QuantPlan::from_model_config(release.config);
  const quant::QuantPlan* w4a4 = plan ? &*plan : nullptr;
  m.embed = bind_linear(ws, kTextPrefix + "embed_tokens", t.vocab_size, t.hidden_size, false);
  const int64_t H = t.hidden_size, I = t.intermediate_size;
  for (int64_t l = 0; l < t.num_hidden_layers; ++l) {
    const std::string p = kTextPrefix + "layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.type = t.layer_types.at(static_cast<size_t>(l));
    L.input_norm = upload_floats(read_f32(ws, p + "input_layernorm.weight", H));
    L.post_norm = upload_floats(read_f32(ws, p + "post_attention_layernorm.weight", H));
    if (L.type == LayerType::kLinearAttention) {
      auto d = std::make_unique<DeltaNetWeights>();
      const std::string q = p + "linear_attn.";
      d->dims = {t.linear_num_key_heads, t.linear_num_value_heads, t.linear_key_head_dim, t.linear_value_head_dim};
      d->key_dim = t.linear_key_dim();
      d->value_dim = t.linear_value_dim();
      d->conv_dim = t.linear_conv_dim();
      d->kernel = t.linear_conv_kernel_dim;
      const int64_t nv = d->dims.n_v_heads;
      d->qkv = upload_linear(bind_linear(ws, q + "in_proj_qkv", d->conv_dim, H, w4a4));
      d->z = upload_linear(bind_linear(ws, q + "in_proj_z", d->value_dim, H, w4a4));
      d->b = upload_linear(bind_linear(ws, q + "in_proj_b", nv, H, w4a4));
      d->a = upload_linear(bind_linear(ws, q + "in_proj_a", nv, H, w4a4));
      d->out = upload_linear(bind_linear(ws, q + "out_proj", H, d->value_dim, w4a4));
      d->conv_weight = upload_floats(read_f32(ws, q + "conv1d.weight", d->conv_dim * d->kernel));
      d->A_log = upload_floats(read_f32(ws, q + "A_log", nv));
      d->dt_bias = upload_floats(read_f32(ws, q + "dt_bias", nv));
      d->norm_weight = upload_floats(read_f32(ws, q + "norm.weight", d->dims.d_v));
      for (const DeviceLinear* w : {&d->qkv, &d->z, &d->b, &d->a, &d->out}) m.add(*w);
      L.deltanet = std::move(d);
    } else {
      auto at = std::make_unique<AttentionWeights>();
      const std::string q = p + "self_attn.";
      const int64_t dh = t.head_dim, nq = t.num_attention_heads, nkv = t.num_key_value_heads;
      at->shape = {nq, nkv, dh, 1.0f / std::sqrt(static_cast<float>(dh))};
      at->q = upload_linear(bind_linear(ws, q + "q_proj", 2 * nq * dh, H, w4a4));
      at->k = upload_linear(bind_linear(ws, q + "k_proj", nkv * dh, H, w4a4));
      at->v = upload_linear(bind_linear(ws, q + "v_proj", nkv * dh, H, w4a4));
      at->o = upload_linear(bind_linear(ws, q + "o_proj", H, nq * dh, w4a4));
      at->q_norm = upload_floats(read_f32(ws, q + "q_norm.weight", dh));
      at->k_norm = upload_floats(read_f32(ws, q + "k_norm.weight", dh));
      for (const DeviceLinear* w : {&at->q, &at->k, &at->v, &at->o}) m.add(*w);
      L.attention = std::move(at);
    }
    L.gate = upload_linear(bind_linear(ws, p + "mlp.gate_proj", I, H, w4a4));
    L.up = upload_linear(bind_linear(ws, p + "mlp.up_proj", I, H, w4a4));
    L.down = upload_linear(bind_linear(ws, p + "mlp.down_proj", H, I, w4a4));
    for (const DeviceLinear* w : {&L.gate, &L.up, &L.down}) m.add(*w);
    m.layers.push_back(std::move(L));
  }
  m.final_norm = upload_floats(read_f32(ws, kTextPrefix + "norm.weight", H));
}

CudaBackbone::~CudaBackbone() = default;

size_t CudaBackbone::weight_bytes() const { return impl_->weight_bytes; }

std::vector<float> CudaBackbone::forward(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                         std::span<const EmbeddingOverride> overrides) const {
  const BackboneSequence one{ids, positions, overrides};
  return std::move(forward_batch(std::span(&one, 1)).front());
}

std::vector<std::vector<float>> CudaBackbone::forward_batch(std::span<const BackboneSequence> sequences) const {
  const LentHiddenStates lent = forward_lent(sequences);
  std::vector<std::vector<float>> out;
  for (std::span<const float> rows : lent.sequences) out.emplace_back(rows.begin(), rows.end());
  return out;
}

LentHiddenStates CudaBackbone::forward_lent(std::span<const BackboneSequence> sequences) const {
  const Impl& m = *impl_;
  const TextConfig& c = m.cfg;
  const int64_t H = c.hidden_size;
  const int64_t n_seq = static_cast<int64_t>(sequences.size());
  if (n_seq == 0) return {};
  if (n_seq > 65535) throw Error(ErrorKind::kInvalidRequest, "a batch holds at most 65535 sequences");
  // Packed rows: sequence b holds rows [starts[b], starts[b + 1]).
  std::vector<int64_t> starts(static_cast<size_t>(n_seq + 1), 0);
  for (int64_t b = 0; b < n_seq; ++b) {
    const BackboneSequence& q = sequences[b];
    const int64_t Lb = static_cast<int64_t>(q.ids.size());
    if (!q.positions.empty() && static_cast<int64_t>(q.positions.size()) != 3 * Lb)
      throw Error(ErrorKind::kInternal, "M-RoPE positions have " + std::to_string(q.positions.size()) +
                                            " values, expected 3 × " + std::to_string(Lb));
    starts[b + 1] = starts[b] + Lb;
  }
  const int64_t L = starts.back();  // all rows of the batch
  for (int64_t b = 0; b < n_seq; ++b) {
    const BackboneSequence& q = sequences[b];
    const int64_t Lb = starts[b + 1] - starts[b];
    for (int64_t t = 0; t < Lb; ++t)
      if (q.ids[t] < 0 || q.ids[t] >= c.vocab_size)
        throw Error(ErrorKind::kInvalidRequest, "token id " + std::to_string(q.ids[t]) + " at position " +
                                                    std::to_string(t) + " is outside the vocabulary [0, " +
                                                    std::to_string(c.vocab_size) + ")");
    for (const EmbeddingOverride& o : q.overrides)
      if (o.position < 0 || o.position >= Lb || o.values == nullptr)
        throw Error(ErrorKind::kInternal, "embedding override at position " + std::to_string(o.position) +
                                              " is outside the sequence of " + std::to_string(Lb) + " tokens");
  }
  LentHiddenStates out;
  if (L == 0) {
    out.sequences.resize(static_cast<size_t>(n_seq));
    return out;
  }

  std::unique_lock lock(m.mutex);
  // A staging slot for this prefill, kept until the caller drops the lent states.
  auto [slot_index, slot_hold] = m.take_staging();
  PinnedBuffer& staging = m.staging[slot_index];
  GpuContext& ctx = *m.ctx;
  cudaStream_t s = ctx.stream();
  const size_t f = sizeof(float);
  // Embedding rows and RoPE angles on the host, into page-locked staging (the angles are part
  // of the model's definition and use the reference formula on every backend).
  const int64_t half = m.rope.half();
  staging.reserve(static_cast<size_t>(L * H + 2 * L * half) * f);
  float* hh = staging.as<float>();
  float* cos = hh + L * H;
  float* sin = cos + L * half;
  for (int64_t b = 0; b < n_seq; ++b) {
    const BackboneSequence& q = sequences[b];
    const int64_t r0 = starts[b], Lb = starts[b + 1] - r0;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < Lb; ++t) ref::weight_row_f32(m.embed, q.ids[t], hh + (r0 + t) * H);
    for (const EmbeddingOverride& o : q.overrides)
      std::memcpy(hh + (r0 + o.position) * H, o.values, static_cast<size_t>(H) * sizeof(float));
    if (Lb == 0) continue;
    if (q.positions.empty()) {
      // Text: positions 0 … Lb − 1 on all three axes; each row depends on its position only, so
      // rows come from a table kept across calls (torch's cos/sin are costly to reproduce).
      m.extend_rope_table(Lb);
      std::memcpy(cos + r0 * half, m.rope_cos.data(), static_cast<size_t>(Lb * half) * f);
      std::memcpy(sin + r0 * half, m.rope_sin.data(), static_cast<size_t>(Lb * half) * f);
    } else {
      const int32_t* pt = q.positions.data();
      ref::mrope_cos_sin(m.rope, pt, pt + Lb, pt + 2 * Lb, Lb, cos + r0 * half, sin + r0 * half);
    }
  }
  const int64_t nv = c.linear_num_value_heads, conv_dim = c.linear_conv_dim(), vdim = c.linear_value_dim();
  const int64_t dh = c.head_dim, q_width = c.num_attention_heads * dh, kv_width = c.num_key_value_heads * dh;
  const int64_t wide = std::max({conv_dim, 2 * q_width, c.intermediate_size, H});
  m.h.reserve(L * H * f);
  m.cos.reserve(L * half * f);
  m.sin.reserve(L * half * f);
  STAVE_CUDA_CHECK(cudaMemcpyAsync(m.h.as<float>(), hh, L * H * f, cudaMemcpyHostToDevice, s));
  STAVE_CUDA_CHECK(cudaMemcpyAsync(m.cos.as<float>(), cos, L * half * f, cudaMemcpyHostToDevice, s));
  STAVE_CUDA_CHECK(cudaMemcpyAsync(m.sin.as<float>(), sin, L * half * f, cudaMemcpyHostToDevice, s));
  for (DeviceBuffer* b : {&m.x, &m.y}) b->reserve(L * H * f);
  for (DeviceBuffer* b : {&m.big1, &m.big2}) b->reserve(L * wide * f);
  for (DeviceBuffer* b : {&m.z, &m.core}) b->reserve(L * vdim * f);
  for (DeviceBuffer* b : {&m.a, &m.b, &m.g, &m.beta}) b->reserve(L * nv * f);
  m.conv.reserve(L * conv_dim * f);
  for (DeviceBuffer* b : {&m.q, &m.gate}) b->reserve(L * q_width * f);
  for (DeviceBuffer* b : {&m.K, &m.V}) b->reserve(L * kv_width * f);
  m.history.reserve((c.linear_conv_kernel_dim - 1) * conv_dim * f + f);
  m.state.reserve(n_seq * nv * c.linear_key_head_dim * c.linear_value_head_dim * f);
  m.starts.upload(starts.data(), starts.size() * sizeof(int64_t));
  const int64_t* starts_dev = m.starts.as<int64_t>();

  float* h = m.h.as<float>();
  float* x = m.x.as<float>();
  float* y = m.y.as<float>();
  // STAVE_CUDA_STAGES=1: time each stage (synchronizing the stream between stages).
  StageTimer stages("STAVE_CUDA_STAGES", [s] { STAVE_CUDA_CHECK(cudaStreamSynchronize(s)); });
  for (const LayerWeights& lw : m.layers) {
    stages.enter("norms+elementwise");
    dev::rms_norm_zero_centered(h, L, H, lw.input_norm.as<float>(), m.eps, x, s);
    if (lw.deltanet) {
      const DeltaNetWeights& d = *lw.deltanet;
      float* qkv = m.big1.as<float>();
      stages.enter("linear");
      dev::linear(ctx, d.qkv, x, L, qkv);
      dev::linear(ctx, d.z, x, L, m.z.as<float>());
      dev::linear(ctx, d.b, x, L, m.b.as<float>());
      dev::linear(ctx, d.a, x, L, m.a.as<float>());
      stages.enter("gdn conv+gates");
      for (int64_t b = 0; b < n_seq; ++b) {  // each sequence's conv starts from an empty history
        const int64_t r0 = starts[b], Lb = starts[b + 1] - r0;
        if (Lb == 0) continue;
        STAVE_CUDA_CHECK(cudaMemsetAsync(m.history.as<float>(), 0, (d.kernel - 1) * d.conv_dim * f, s));
        dev::causal_conv1d_silu(qkv + r0 * d.conv_dim, Lb, d.conv_dim, d.conv_weight.as<float>(), d.kernel,
                                m.history.as<float>(), m.conv.as<float>() + r0 * d.conv_dim, s);
      }
      dev::gdn_gates(m.a.as<float>(), m.b.as<float>(), d.A_log.as<float>(), d.dt_bias.as<float>(), L, nv,
                     m.g.as<float>(), m.beta.as<float>(), s);
      GatedDeltaInput in;
      in.tokens = L;
      in.q = m.conv.as<float>();
      in.k = in.q + d.key_dim;
      in.v = in.q + 2 * d.key_dim;
      in.stride = d.conv_dim;
      in.g = m.g.as<float>();
      in.beta = m.beta.as<float>();
      STAVE_CUDA_CHECK(cudaMemsetAsync(m.state.as<float>(), 0, n_seq * d.dims.state_floats() * f, s));
      stages.enter("gdn delta rule");
      dev::gated_delta_rule(d.dims, in, m.state.as<float>(), m.core.as<float>(), m.qk, m.exact, s, starts_dev,
                            n_seq);
      stages.enter("norms+elementwise");
      dev::gated_rms_norm(m.core.as<float>(), m.z.as<float>(), L * nv, d.dims.d_v, d.norm_weight.as<float>(), m.eps,
                          qkv, s);
      stages.enter("linear");
      dev::linear(ctx, d.out, qkv, L, y);
    } else {
      const AttentionWeights& at = *lw.attention;
      const int64_t nq = at.shape.n_q_heads, nkv = at.shape.n_kv_heads;
      float* qg = m.big1.as<float>();
      stages.enter("linear");
      dev::linear(ctx, at.q, x, L, qg);
      dev::split_query_gate(qg, L * nq, dh, m.q.as<float>(), m.gate.as<float>(), s);
      dev::linear(ctx, at.k, x, L, m.K.as<float>());
      dev::linear(ctx, at.v, x, L, m.V.as<float>());
      stages.enter("norms+elementwise");
      dev::rms_norm_zero_centered(m.q.as<float>(), L * nq, dh, at.q_norm.as<float>(), m.eps, m.q.as<float>(), s);
      dev::rms_norm_zero_centered(m.K.as<float>(), L * nkv, dh, at.k_norm.as<float>(), m.eps, m.K.as<float>(), s);
      dev::apply_rope(m.q.as<float>(), L, nq, dh, m.rope.rotary_dim, m.cos.as<float>(), m.sin.as<float>(), s);
      dev::apply_rope(m.K.as<float>(), L, nkv, dh, m.rope.rotary_dim, m.cos.as<float>(), m.sin.as<float>(), s);
      float* o = qg;
      stages.enter("attention");
      for (int64_t b = 0; b < n_seq; ++b) {  // each sequence attends to its own keys only
        const int64_t r0 = starts[b], Lb = starts[b + 1] - r0;
        if (Lb == 0) continue;
        dev::attention_causal(ctx, at.shape, m.q.as<float>() + r0 * q_width, Lb, 0, m.K.as<float>() + r0 * kv_width,
                              m.V.as<float>() + r0 * kv_width, o + r0 * q_width);
      }
      stages.enter("norms+elementwise");
      dev::sigmoid_mul(o, m.gate.as<float>(), L * q_width, s);
      stages.enter("linear");
      dev::linear(ctx, at.o, o, L, y);
    }
    stages.enter("norms+elementwise");
    dev::add_inplace(h, y, L * H, s);
    dev::rms_norm_zero_centered(h, L, H, lw.post_norm.as<float>(), m.eps, x, s);
    float* g1 = m.big1.as<float>();
    float* g2 = m.big2.as<float>();
    stages.enter("linear");
    dev::linear(ctx, lw.gate, x, L, g1);
    dev::linear(ctx, lw.up, x, L, g2);
    stages.enter("norms+elementwise");
    dev::silu_mul(g1, g2, L * c.intermediate_size, g1, s);
    stages.enter("linear");
    dev::linear(ctx, lw.down, g1, L, y);
    stages.enter("norms+elementwise");
    dev::add_inplace(h, y, L * H, s);
  }
  dev::rms_norm_zero_centered(h, L, H, m.final_norm.as<float>(), m.eps, h, s);
  stages.enter("copy back");
  STAVE_CUDA_CHECK(cudaMemcpyAsync(hh, h, L * H * f, cudaMemcpyDeviceToHost, s));
  ctx.synchronize();
  stages.report("cuda stages", L);
  for (int64_t b = 0; b < n_seq; ++b)
    out.sequences.emplace_back(hh + starts[b] * H, static_cast<size_t>((starts[b + 1] - starts[b]) * H));
  out.hold = std::move(slot_hold);
  return out;
}

}  // namespace stave::cuda
