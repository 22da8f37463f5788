#include "model/backbone.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "formats/tensor_names.h"
#include "formats/quark_config.h"
#include "ops/reference.h"
#include "stave/errors.h"
#include "util/stage_timer.h"

namespace stave {
namespace {

RopeSpec rope_spec(const TextConfig& t) {
  RopeSpec s;
  s.rotary_dim = t.rotary_dim();
  s.theta = t.rope_theta;
  s.mrope_section = t.mrope_section;
  if (s.rotary_dim <= 0 || s.rotary_dim % 2 != 0 || s.rotary_dim > t.head_dim)
    throw Error(ErrorKind::kInvalidModel, "rotary dim " + std::to_string(s.rotary_dim) +
                                              " (head_dim × partial_rotary_factor) must be even and in (0, head_dim]");
  if (!t.mrope_interleaved)
    throw Error(ErrorKind::kUnsupported, "rope_parameters.mrope_interleaved = false is not supported (Qwen3.5 uses "
                                         "interleaved M-RoPE)");
  return s;
}

void check_text_config(const TextConfig& t) {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) throw Error(ErrorKind::kInvalidModel, std::string("text_config.") + name + " must be positive");
  };
  positive(t.hidden_size, "hidden_size");
  positive(t.num_hidden_layers, "num_hidden_layers");
  positive(t.linear_num_key_heads, "linear_num_key_heads");
  positive(t.linear_conv_kernel_dim, "linear_conv_kernel_dim");
  if (static_cast<int64_t>(t.layer_types.size()) != t.num_hidden_layers)
    throw Error(ErrorKind::kInvalidModel, "text_config.layer_types has " + std::to_string(t.layer_types.size()) +
                                              " entries for " + std::to_string(t.num_hidden_layers) + " layers");
  if (t.linear_num_value_heads % t.linear_num_key_heads != 0)
    throw Error(ErrorKind::kInvalidModel, "linear_num_value_heads (" + std::to_string(t.linear_num_value_heads) +
                                              ") must be a multiple of linear_num_key_heads (" +
                                              std::to_string(t.linear_num_key_heads) + ")");
}

}  // namespace

Backbone::Backbone(const Release& release, const Backend& backend, BackboneOptions options)
    : Backbone(release.config, release.weights, backend, options) {}

Backbone::Backbone(const ModelConfig& config, const TensorStore& weights, const Backend& backend,
                   BackboneOptions options)
    : config_(config.text), backend_(backend), options_(options) {
  check_text_config(config_);
  if (options_.chunk_tokens < 0) throw Error(ErrorKind::kInternal, "BackboneOptions.chunk_tokens must not be negative");
  rope_ = rope_spec(config_);
  // Which linears are MXFP4 and which quantize their input comes from quantization_config,
  // resolved per layer (exclude, layer_quant_config, layer_type_quant_config, global); a
  // checkpoint stored otherwise than its config says is refused here, naming the tensor.
  const std::optional<quant::QuantPlan> plan = quant::QuantPlan::from_model_config(config);
  if (plan) plan->check_against(weights);
  // The embedding is a table, never quantized as an input; bind it like a linear to read rows
  // (the backend's embedding_rows: on the host, or from a copy resident on the device).
  embed_tokens_ = bind_linear(weights, kEmbedTokens, config_.vocab_size, config_.hidden_size, false);
  backend_.prepare_embedding(embed_tokens_);
  layers_.reserve(static_cast<size_t>(config_.num_hidden_layers));
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l)
    layers_.emplace_back(weights, config_, l, plan ? &*plan : nullptr, backend_);
  final_norm_ = backend_.to_device(Tensor::host(read_f32(weights, kFinalNorm, config_.hidden_size)));
}

void Backbone::check_ids(std::span<const int32_t> ids) const {
  const int64_t L = static_cast<int64_t>(ids.size());
  for (int64_t t = 0; t < L; ++t) {
    const int32_t id = ids[t];
    if (id < 0 || id >= config_.vocab_size)
      throw Error(ErrorKind::kInvalidRequest, "token id " + std::to_string(id) + " at position " + std::to_string(t) +
                                                  " is outside the vocabulary [0, " +
                                                  std::to_string(config_.vocab_size) + ")");
  }
}

void Backbone::embed_rows(std::span<const int32_t> ids, std::span<const EmbeddingOverride> overrides,
                          const Tensor& h) const {
  const int64_t L = static_cast<int64_t>(ids.size()), H = config_.hidden_size;
  check_ids(ids);
  for (const EmbeddingOverride& o : overrides)
    if (o.position < 0 || o.position >= L || o.values == nullptr)
      throw Error(ErrorKind::kInternal, "embedding override at position " + std::to_string(o.position) +
                                            " is outside the sequence of " + std::to_string(L) + " tokens");
  if (overrides.empty()) {
    backend_.embedding_rows(embed_tokens_, ids, h);
    return;
  }
  // Overridden rows (images) are composed on the host, and the rows go to the backend at once.
  const Tensor rows = h.device() == Device::kCpu ? h : backend_.host_staging({L, H});
  float* out = rows.data<float>();
  ref::weight_rows_f32(embed_tokens_, ids, out);
  for (const EmbeddingOverride& o : overrides)
    std::memcpy(out + o.position * H, o.values, static_cast<size_t>(H) * sizeof(float));
  if (rows.raw() != h.raw()) backend_.copy_from_host(out, h);
}

void Backbone::rope_rows(std::span<const int32_t> positions, int64_t first, int64_t L, float* cos, float* sin) const {
  if (L == 0) return;
  // RoPE angles of every position, shared by all full-attention layers: O(L × rotary_dim).
  // Computed with the reference formula on every backend: the fp32 angles are part of the
  // model's definition (HF rounds them the same way), not an op to speed up.
  std::vector<int32_t> arange;
  const int32_t *pt, *ph, *pw;
  if (positions.empty()) {
    arange.resize(static_cast<size_t>(L));
    for (int64_t t = 0; t < L; ++t) arange[t] = static_cast<int32_t>(first + t);
    pt = ph = pw = arange.data();
  } else {
    if (static_cast<int64_t>(positions.size()) != 3 * L)
      throw Error(ErrorKind::kInternal, "M-RoPE positions have " + std::to_string(positions.size()) +
                                            " values, expected 3 × " + std::to_string(L));
    pt = positions.data();
    ph = pt + L;
    pw = ph + L;
  }
  ref::mrope_cos_sin(rope_, pt, ph, pw, L, cos, sin);
}

std::vector<float> Backbone::forward(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                     std::span<const EmbeddingOverride> overrides) const {
  Sequence seq = start(ids, positions, overrides);
  for (int64_t l = 0; l < num_layers(); ++l) run_layer(l, seq);
  return finish(seq);
}

Backbone::Sequence Backbone::start(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                   std::span<const EmbeddingOverride> overrides) const {
  const int64_t L = static_cast<int64_t>(ids.size());
  if (!positions.empty() && static_cast<int64_t>(positions.size()) != 3 * L)
    throw Error(ErrorKind::kInternal, "M-RoPE positions have " + std::to_string(positions.size()) +
                                          " values, expected 3 × " + std::to_string(L));
  return rows_in(ids, positions, overrides, 0);
}

Backbone::Sequence Backbone::rows_in(std::span<const int32_t> ids, std::span<const int32_t> positions,
                                     std::span<const EmbeddingOverride> overrides, int64_t first) const {
  const int64_t L = static_cast<int64_t>(ids.size()), H = config_.hidden_size, half = rope_.half();
  Tensor h = backend_.empty({L, H}), cos = backend_.host_staging({L, half}), sin = backend_.host_staging({L, half});
  embed_rows(ids, overrides, h);
  rope_rows(positions, first, L, cos.data<float>(), sin.data<float>());
  return Sequence{L, h, backend_.to_device(cos), backend_.to_device(sin), Tensor(), Tensor(), -1};
}

void Backbone::final_norm(float* h, int64_t rows) const {
  if (rows > 0)
    backend_.rms_norm_zero_centered(h, rows, config_.hidden_size, final_norm_.data<float>(),
                                    static_cast<float>(config_.rms_norm_eps), h);
}

void Backbone::run_layer(int64_t index, Sequence& seq, const DecoderLayer::MlpInputObserver* mlp_input) const {
  if (index < 0 || index >= num_layers())
    throw Error(ErrorKind::kInternal, "layer " + std::to_string(index) + " is outside the model's " +
                                          std::to_string(num_layers()) + " layers");
  if (seq.tokens == 0) return;
  DecoderLayer::State state = layers_[static_cast<size_t>(index)].new_state(backend_, seq.tokens);
  if (seq.normed.raw() == nullptr) seq.normed = backend_.empty({seq.tokens, config_.hidden_size});
  if (seq.residual.raw() == nullptr) seq.residual = backend_.empty({seq.tokens, config_.hidden_size});
  const bool pending = seq.pending_layer == index;
  if (seq.pending_layer >= 0 && !pending)
    throw Error(ErrorKind::kInternal, "layer " + std::to_string(index) + " run before layer " +
                                          std::to_string(seq.pending_layer) + ", which holds a residual");
  seq.pending_layer = -1;  // stale if the layer throws
  run_layer_from(index, seq.h.data<float>(), seq.tokens, seq.cos, seq.sin, state, 0, mlp_input,
                 seq.normed.data<float>(), seq.residual.data<float>(), pending);
  seq.pending_layer = layer_after(index) ? index + 1 : -1;
}

const DecoderLayer* Backbone::layer_after(int64_t index) const {
  return index + 1 < num_layers() ? &layers_[static_cast<size_t>(index + 1)] : nullptr;
}

void Backbone::run_layer_from(int64_t index, float* h, int64_t L, const Tensor& cos, const Tensor& sin,
                              DecoderLayer::State& state, int64_t begin,
                              const DecoderLayer::MlpInputObserver* mlp_input, float* normed, float* residual,
                              bool pending) const {
  const int64_t H = config_.hidden_size, half = rope_.half();
  if (L == 0) return;
  // The exact path runs the whole sequence in one step, as the reference does: where ATen's
  // element-wise kernels switch between vector and scalar code depends on the whole tensor.
  int64_t C = options_.chunk_tokens;
  if (C == 0) C = backend_.preferred_step_tokens();
  if (C == 0) C = L;
  const DecoderLayer& layer = layers_[static_cast<size_t>(index)];
  DecoderLayer::State* const one = &state;
  for (int64_t c0 = 0; c0 < L; c0 += C) {
    TokenBatch step;
    step.rows = std::min(C, L - c0);
    step.slices = {SequenceSlice{0, step.rows, begin + c0}};
    step.rope_cos = cos.data<float>() + c0 * half;
    step.rope_sin = sin.data<float>() + c0 * half;
    if (normed) {
      const DecoderLayer::Carry carry{normed + c0 * H, residual + c0 * H, pending, layer_after(index)};
      layer.forward(backend_, h + c0 * H, step, std::span(&one, 1), mlp_input, &carry);
    } else {
      layer.forward(backend_, h + c0 * H, step, std::span(&one, 1), mlp_input);
    }
  }
}

Tensor Backbone::forward_batch(std::span<const BackboneSequence> sequences, std::vector<int64_t>& starts) const {
  const int64_t n_seq = static_cast<int64_t>(sequences.size()), H = config_.hidden_size, half = rope_.half();
  if (n_seq > 65535) throw Error(ErrorKind::kInvalidRequest, "a batch holds at most 65535 sequences");
  // Packed rows: sequence b holds rows [starts[b], starts[b + 1]).
  starts.assign(static_cast<size_t>(n_seq + 1), 0);
  for (int64_t b = 0; b < n_seq; ++b) {
    const BackboneSequence& q = sequences[b];
    const int64_t Lb = static_cast<int64_t>(q.ids.size());
    if (!q.positions.empty() && static_cast<int64_t>(q.positions.size()) != 3 * Lb)
      throw Error(ErrorKind::kInternal, "M-RoPE positions have " + std::to_string(q.positions.size()) +
                                            " values, expected 3 × " + std::to_string(Lb));
    starts[b + 1] = starts[b] + Lb;
  }
  const int64_t L = starts.back();
  // The embedding rows of all sequences in one call (every id is checked before anything runs),
  // then the RoPE angles on the host while the rows may still be on their way.
  std::vector<int32_t> all_ids;
  std::vector<EmbeddingOverride> all_overrides;
  all_ids.reserve(static_cast<size_t>(L));
  for (int64_t b = 0; b < n_seq; ++b) {
    const BackboneSequence& q = sequences[b];
    const int64_t r0 = starts[b], Lb = starts[b + 1] - r0;
    for (const EmbeddingOverride& o : q.overrides) {
      if (o.position < 0 || o.position >= Lb)  // checked here: shifted below, it could land in the next sequence
        throw Error(ErrorKind::kInternal, "embedding override at position " + std::to_string(o.position) +
                                              " is outside the sequence of " + std::to_string(Lb) + " tokens");
      all_overrides.push_back({r0 + o.position, o.values});
    }
    check_ids(q.ids);  // naming the position within its sequence
    all_ids.insert(all_ids.end(), q.ids.begin(), q.ids.end());
  }
  if (L == 0) return backend_.empty({0, H});
  const Tensor h = backend_.empty({L, H});
  embed_rows(all_ids, all_overrides, h);
  Tensor cos = backend_.host_staging({L, half}), sin = backend_.host_staging({L, half});
  for (int64_t b = 0; b < n_seq; ++b) {
    const int64_t r0 = starts[b], Lb = starts[b + 1] - r0;
    rope_rows(sequences[b].positions, 0, Lb, cos.data<float>() + r0 * half, sin.data<float>() + r0 * half);
  }
  if (n_seq == 1) {  // one sequence: the stepped path
    Sequence seq{L, h, backend_.to_device(cos), backend_.to_device(sin), Tensor(), Tensor(), -1};
    for (int64_t l = 0; l < num_layers(); ++l) run_layer(l, seq);
    final_norm(seq.h.data<float>(), L);
    return seq.h;
  }
  const Tensor dcos = backend_.to_device(cos), dsin = backend_.to_device(sin);
  TokenBatch batch;
  batch.rows = L;
  for (int64_t b = 0; b < n_seq; ++b) batch.slices.push_back({starts[b], starts[b + 1] - starts[b], 0});
  batch.rope_cos = dcos.data<float>();
  batch.rope_sin = dsin.data<float>();
  const Tensor normed = backend_.empty({L, H}), residual = backend_.empty({L, H});
  for (int64_t l = 0; l < num_layers(); ++l) {
    const DecoderLayer& layer = layers_[static_cast<size_t>(l)];
    std::vector<DecoderLayer::State> states;
    std::vector<DecoderLayer::State*> pointers;
    states.reserve(static_cast<size_t>(n_seq));
    for (const SequenceSlice& q : batch.slices) states.push_back(layer.new_state(backend_, q.tokens));
    for (DecoderLayer::State& s : states) pointers.push_back(&s);
    const DecoderLayer::Carry carry{normed.data<float>(), residual.data<float>(), l > 0, layer_after(l)};
    layer.forward(backend_, h.data<float>(), batch, pointers, nullptr, &carry);
  }
  final_norm(h.data<float>(), L);
  return h;
}

LentHiddenStates Backbone::forward_lent(std::span<const BackboneSequence> sequences, Lend where) const {
  std::vector<int64_t> starts;
  // STAVE_BACKBONE_TIMES: host time to issue the forward beside the wait for the device to finish it
  // (a profiling aid: an issue time close to the whole says the host's launches bound the forward).
  StageTimer times("STAVE_BACKBONE_TIMES");
  times.enter("issue");
  const Tensor h = forward_batch(sequences, starts);
  LentHiddenStates out;
  if (sequences.empty()) return out;
  const int64_t H = config_.hidden_size;
  if (where == Lend::kDevice && h.device() != Device::kCpu) {
    times.enter("wait");
    backend_.synchronize();  // the head reads them from another stream
    times.report("backbone", starts.back());
    const float* rows = h.empty() ? nullptr : h.data<float>();
    for (size_t b = 0; b + 1 < starts.size(); ++b) {
      out.sequences.emplace_back();
      out.device.push_back(rows ? rows + starts[b] * H : nullptr);
    }
    out.hold = h.storage();
    return out;
  }
  const Tensor host = backend_.to_host(h);
  const float* rows = host.empty() ? nullptr : host.data<float>();
  for (size_t b = 0; b + 1 < starts.size(); ++b)
    out.sequences.emplace_back(rows ? rows + starts[b] * H : nullptr, static_cast<size_t>((starts[b + 1] - starts[b]) * H));
  out.hold = host.storage();
  return out;
}

Backbone::SequenceState Backbone::new_state(int64_t expected_tokens) const {
  SequenceState s;
  s.layers.reserve(layers_.size());
  for (const DecoderLayer& layer : layers_)
    s.layers.push_back(layer.new_state(backend_, std::max<int64_t>(expected_tokens, 0)));
  return s;
}

void Backbone::check_extend(std::span<const int32_t> ids, const SequenceState& state) const {
  if (state.layers.size() != layers_.size())
    throw Error(ErrorKind::kInternal, "sequence state has " + std::to_string(state.layers.size()) +
                                          " layers, the model " + std::to_string(layers_.size()));
  const int64_t L = static_cast<int64_t>(ids.size());
  if (state.tokens + L > config_.max_position_embeddings)
    throw Error(ErrorKind::kRequestTooLarge, "the sequence would reach " + std::to_string(state.tokens + L) +
                                                 " tokens, past the model's max_position_embeddings " +
                                                 std::to_string(config_.max_position_embeddings));
  check_ids(ids);
}

std::vector<float> Backbone::extend(std::span<const int32_t> ids, SequenceState& state) const {
  check_extend(ids, state);
  const int64_t L = static_cast<int64_t>(ids.size());
  Sequence seq = rows_in(ids, {}, {}, state.tokens);
  const Tensor normed = backend_.empty({L, config_.hidden_size}), residual = backend_.empty({L, config_.hidden_size});
  for (int64_t l = 0; l < num_layers(); ++l)
    run_layer_from(l, seq.h.data<float>(), L, seq.cos, seq.sin, state.layers[static_cast<size_t>(l)], state.tokens,
                   nullptr, normed.data<float>(), residual.data<float>(), l > 0);
  state.tokens += L;
  return finish(seq);
}

std::vector<float> Backbone::decode_batch(std::span<SequenceState* const> states,
                                          std::span<const int32_t> next_ids) const {
  if (next_ids.size() != states.size())
    throw Error(ErrorKind::kInternal, "decode_batch: " + std::to_string(next_ids.size()) + " tokens for " +
                                          std::to_string(states.size()) + " sequences");
  std::vector<std::span<const int32_t>> ids;
  ids.reserve(next_ids.size());
  for (size_t b = 0; b < next_ids.size(); ++b) ids.push_back(next_ids.subspan(b, 1));
  return prefill_batch(ids, states);
}

namespace {

// One step of a packed extend: rows [row0, row0 + rows) of the packed rows, holding `slices`
// (row0 relative to the step) of the sequences `which`.
struct PackedStep {
  int64_t row0 = 0, rows = 0;
  std::vector<SequenceSlice> slices;
  std::vector<size_t> which;
};

}  // namespace

std::vector<float> Backbone::prefill_batch(std::span<const std::span<const int32_t>> ids,
                                           std::span<SequenceState* const> states) const {
  const int64_t n = static_cast<int64_t>(states.size()), H = config_.hidden_size, half = rope_.half();
  if (static_cast<int64_t>(ids.size()) != n)
    throw Error(ErrorKind::kInternal, "prefill_batch: " + std::to_string(ids.size()) + " token lists for " +
                                          std::to_string(n) + " sequences");
  // Everything is checked before anything runs: a refused batch leaves every state as it was.
  int64_t longest = 0, total = 0;
  for (int64_t b = 0; b < n; ++b) {
    const SequenceState* s = states[b];
    if (s == nullptr) throw Error(ErrorKind::kInternal, "sequence " + std::to_string(b) + " has no state");
    for (int64_t c = 0; c < b; ++c)
      if (states[c] == s) throw Error(ErrorKind::kInternal, "a sequence state appears twice in one batch");
    if (ids[b].empty())
      throw Error(ErrorKind::kInvalidRequest, "sequence " + std::to_string(b) + " of the batch has no tokens");
    try {
      check_extend(ids[b], *s);
    } catch (const Error& e) {
      throw Error(e.kind(), "sequence " + std::to_string(b) + " of the batch: " + e.what());
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ids[b].size()));
    total += static_cast<int64_t>(ids[b].size());
  }
  std::vector<float> out(static_cast<size_t>(n * H));
  if (n == 0) return out;
  int64_t C = options_.chunk_tokens;
  if (C == 0) C = backend_.preferred_step_tokens();
  if (C == 0) C = longest;
  // Step-major packing: step k holds tokens [k·C, (k+1)·C) of each sequence, at its position.
  std::vector<PackedStep> steps;
  std::vector<int64_t> last_row(static_cast<size_t>(n));
  Tensor cos = backend_.host_staging({total, half}), sin = backend_.host_staging({total, half});
  std::vector<int32_t> packed_ids;  // in the packed rows' order
  packed_ids.reserve(static_cast<size_t>(total));
  int64_t row = 0;
  for (int64_t c0 = 0; c0 < longest; c0 += C) {
    PackedStep step;
    step.row0 = row;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t Lb = static_cast<int64_t>(ids[b].size());
      if (c0 >= Lb) continue;
      const int64_t t = std::min(C, Lb - c0), begin = states[b]->tokens + c0;
      const std::span<const int32_t> part = ids[b].subspan(static_cast<size_t>(c0), static_cast<size_t>(t));
      packed_ids.insert(packed_ids.end(), part.begin(), part.end());
      rope_rows({}, begin, t, cos.data<float>() + row * half, sin.data<float>() + row * half);
      step.slices.push_back({row - step.row0, t, begin});
      step.which.push_back(static_cast<size_t>(b));
      row += t;
      if (c0 + t == Lb) last_row[b] = row - 1;
    }
    step.rows = row - step.row0;
    steps.push_back(std::move(step));
  }
  const Tensor dh = backend_.empty({total, H});
  embed_rows(packed_ids, {}, dh);
  const Tensor dcos = backend_.to_device(cos), dsin = backend_.to_device(sin);
  const Tensor normed = backend_.empty({total, H}), residual = backend_.empty({total, H});
  std::vector<DecoderLayer::State*> pointers;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DecoderLayer* next = layer_after(static_cast<int64_t>(l));
    for (const PackedStep& step : steps) {
      TokenBatch batch;
      batch.rows = step.rows;
      batch.slices = step.slices;
      batch.rope_cos = dcos.data<float>() + step.row0 * half;
      batch.rope_sin = dsin.data<float>() + step.row0 * half;
      pointers.clear();
      for (size_t b : step.which) pointers.push_back(&states[b]->layers[l]);
      const DecoderLayer::Carry carry{normed.data<float>() + step.row0 * H, residual.data<float>() + step.row0 * H,
                                      l > 0, next};
      layers_[l].forward(backend_, dh.data<float>() + step.row0 * H, batch, pointers, nullptr, &carry);
    }
  }
  for (int64_t b = 0; b < n; ++b) states[b]->tokens += static_cast<int64_t>(ids[b].size());
  // The last rows, in the order of `states` (a decode step's rows already are).
  Tensor last = dh;
  if (total != n) {
    last = backend_.empty({n, H});
    for (int64_t b = 0; b < n; ++b) backend_.copy(dh.rows(last_row[b], 1), last.rows(b, 1));
  }
  final_norm(last.data<float>(), n);
  backend_.copy_to_host(last, out.data());
  return out;
}

std::vector<float> Backbone::finish(Sequence& seq) const {
  const int64_t H = config_.hidden_size;
  std::vector<float> out(static_cast<size_t>(seq.tokens * H));
  if (seq.tokens == 0) return out;
  if (seq.pending_layer >= 0)
    throw Error(ErrorKind::kInternal, "a sequence finished before layer " + std::to_string(seq.pending_layer) +
                                          " ran (its residual is not yet added)");
  final_norm(seq.h.data<float>(), seq.tokens);
  backend_.copy_to_host(seq.h, out.data());
  seq.h = Tensor();
  seq.normed = Tensor();
  seq.residual = Tensor();
  seq.pending_layer = -1;
  return out;
}

}  // namespace stave
