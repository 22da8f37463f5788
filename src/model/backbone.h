// The Qwen3.5 text backbone (transformers' Qwen3.5): token embedding, the decoder layers and the
// final zero-centred RMSNorm. `forward` returns the final-normed hidden state of every
// position, which is what the joint schema head reads (the LM head is never applied).
//
// Written once for every backend: the residual stream, the layers' temporaries and the
// per-sequence state live in the backend's memory (host for the CPU backends, the GPU's for
// CUDA); only the embedding rows and RoPE tables go in and the hidden states come out.
//
// The pass is layer-major: each layer runs over the whole sequence in token steps before the
// next layer starts, carrying its state (conv history, delta-rule state, KV cache) from step
// to step. Temporaries are O(step × layer width); the residual stream is O(L × hidden), and
// one full-attention layer's KV cache O(L × 2·n_kv·head_dim) while that layer runs. Several
// sequences packed into one pass (forward_batch; prefill_batch and decode_batch, which keep
// each sequence's state) share the linear layers' rows; the conv, the delta rule and attention
// keep each sequence apart.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "io/model_config.h"
#include "io/release.h"
#include "io/tensor_store.h"
#include "formats/linear_weight.h"
#include "model/text_layers/token_chunk.h"
#include "model/text_layers/decoder_layer.h"
#include "ops/backend.h"
#include "ops/rope.h"

namespace stave {

// Replaces the embedding of one position (e.g. an image token by its vision feature).
struct EmbeddingOverride {
  int64_t position = 0;
  const float* values = nullptr;  // hidden_size floats, owned by the caller
};

// One sequence of a batched prefill (a device backbone's forward_batch): token ids, M-RoPE
// positions (3·L values, or empty for 0 … L−1) and embedding overrides, as Backbone::forward.
struct BackboneSequence {
  std::span<const int32_t> ids;
  std::span<const int32_t> positions;
  std::span<const EmbeddingOverride> overrides;
};

// Hidden states handed over without copying them into fresh vectors: one span of
// L·hidden_size floats per sequence, in host memory kept for as long as this object (its
// `hold`) lives (page-locked memory the CUDA backend reuses); drop it once the head is done.
// Lent on the device (forward_lent's Lend::kDevice), `device` holds each sequence's rows in the
// backend's memory instead (every kernel that wrote them has finished) and the host spans are
// empty.
struct LentHiddenStates {
  std::vector<std::span<const float>> sequences;
  std::vector<const float*> device;  // empty, or one device pointer per sequence
  std::shared_ptr<void> hold;
  // Sequence b's rows for the joint head.
  HiddenRows rows(size_t b) const {
    HiddenRows r(sequences.at(b).data());
    if (!device.empty()) r.device = device.at(b);
    return r;
  }
};

// Peak working memory of a prefill of L tokens: h [L, hidden] + one layer's state at a time
// (layers run one after another over all chunks: full attention K and V [L, n_kv, head_dim]
// each; Gated DeltaNet conv history + state [n_v, d_k, d_v]) + one chunk's activations
// O(chunk_tokens × widest projection) + the ops' bounded scratch (src/backends/cpu/cpu_backend.h).
// Nothing is L×L: attention walks keys in tiles with an online softmax.
struct BackboneOptions {
  // Tokens per layer step of one sequence (a multiple of 64 keeps GDN chunks aligned). 0: the
  // backend's preferred_step_tokens() — the whole sequence on the reference backend (the exact
  // path rounds like the reference only then, see docs/numerics.md) and on CUDA, 256 on the
  // CPU backend. Packed sequences (forward_batch) always run in one step.
  int64_t chunk_tokens = 0;
};

class Backbone {
 public:
  // Binds every weight once and makes it resident on `backend` (backend.prepare; the CPU
  // backends use linear weights in place from the mapped checkpoint, so `weights` (the
  // release) must outlive the Backbone); small tensors are copied to fp32.
  Backbone(const ModelConfig& config, const TensorStore& weights, const Backend& backend,
           BackboneOptions options = {});
  Backbone(const Release& release, const Backend& backend, BackboneOptions options = {});

  const TextConfig& config() const { return config_; }
  const Backend& backend() const { return backend_; }
  int64_t hidden_size() const { return config_.hidden_size; }

  // ids: [L] token ids in [0, vocab_size).
  // positions: empty (text only: arange) or 3·L M-RoPE position ids, rows T, H, W.
  // overrides: rows of the embedding output to replace before the first layer.
  // Returns the final-normed hidden states [L, hidden_size], fp32.
  std::vector<float> forward(std::span<const int32_t> ids, std::span<const int32_t> positions = {},
                             std::span<const EmbeddingOverride> overrides = {}) const;

  // Batched prefill: the sequences packed into one pass. Returns the final-normed hidden states
  // of all rows [Σ L, hidden] in the backend's memory; sequence b holds rows
  // [starts[b], starts[b + 1]). Each sequence's rows equal forward() of it alone, up to the
  // accumulation order of products over more rows.
  Tensor forward_batch(std::span<const BackboneSequence> sequences, std::vector<int64_t>& starts) const;
  // forward_batch with the hidden states lent: in host memory (no copy on a CPU backend), or
  // with Lend::kDevice left in the backend's memory (for a head that reads them there; on a CPU
  // backend the same as kHost).
  enum class Lend { kHost, kDevice };
  LentHiddenStates forward_lent(std::span<const BackboneSequence> sequences, Lend where = Lend::kHost) const;

  // Layer-by-layer stepping, for work that needs every sequence at one layer before the next
  // (AWQ calibration) or a check between layers (cancellation). forward() is start(),
  // run_layer() for each layer, finish().
  struct Sequence {
    int64_t tokens = 0;
    Tensor h;         // residual stream [tokens, hidden], in the backend's memory
    Tensor cos, sin;  // RoPE tables [tokens, rotary_dim / 2], in the backend's memory
    // The layers' norm scratch, and the MLP output of the layer before `pending_layer` that
    // layer adds to h first (run_layer's DecoderLayer::Carry); -1: none. Between run_layer calls
    // h lacks that residual; run_layer assumes h is not changed between its calls.
    Tensor normed, residual;
    int64_t pending_layer = -1;
  };
  Sequence start(std::span<const int32_t> ids, std::span<const int32_t> positions = {},
                 std::span<const EmbeddingOverride> overrides = {}) const;
  void run_layer(int64_t layer, Sequence& seq, const DecoderLayer::MlpInputObserver* mlp_input = nullptr) const;
  // Applies the final norm; returns the hidden states in host memory.
  std::vector<float> finish(Sequence& seq) const;
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  // --- Incremental use (text generation): the per-sequence state persists across calls. ---
  // What one sequence has seen so far: each full-attention layer's KV cache and each Gated
  // DeltaNet layer's conv window and recurrent state (in the backend's memory), and the number
  // of tokens consumed.
  struct SequenceState {
    int64_t tokens = 0;
    std::vector<DecoderLayer::State> layers;
  };
  // An empty state; the KV caches reserve room for `expected_tokens` and grow past it.
  SequenceState new_state(int64_t expected_tokens = 0) const;
  // Runs `ids` (text tokens, at positions state.tokens … state.tokens + n − 1) through every
  // layer, continuing `state`, and returns their final-normed hidden states [n, hidden].
  // Ids are checked before anything runs (a refused call leaves the state as it was); an error
  // after that (an internal one) leaves the state unusable.
  // prefill(ids, state) on a new state equals forward(ids); a decode step is the same call with
  // the next token(s): prefill then decode steps equal the whole-sequence forward (up to the
  // order of the reference's chunked vs per-token delta rule, see tests/test_decode_step.cpp).
  std::vector<float> prefill(std::span<const int32_t> ids, SequenceState& state) const { return extend(ids, state); }
  std::vector<float> decode_step(SequenceState& state, std::span<const int32_t> next_ids) const {
    return extend(next_ids, state);
  }

  // One decode step of several sequences in one pass (continuous batching): sequence b gets
  // next_ids[b] at its own position. Returns the final-normed hidden rows [n, hidden] in the
  // order of `states`; each equals decode_step of that sequence alone, up to the accumulation
  // order of products over more rows. Ids are checked before anything runs.
  std::vector<float> decode_batch(std::span<SequenceState* const> states, std::span<const int32_t> next_ids) const;

  // Several sequences extended in one packed pass (continuous batching's admission: the prompts
  // admitted together): sequence b runs ids[b] (at least one token) continuing *states[b], as
  // prefill(ids[b], *states[b]) would, and the linear layers read their weights once for all
  // rows. Returns the final-normed hidden state of each sequence's LAST token [n, hidden], in
  // the order of `states` (what the LM head needs to pick the next token). The rows are packed
  // step-major: step k holds tokens [k·C, (k+1)·C) of every sequence that has them (C as in
  // prefill: BackboneOptions::chunk_tokens or the backend's step), so each sequence is cut
  // exactly where prefill() alone cuts it and its conv, delta rule and attention see the same
  // slices; a step holds at most C rows per sequence. States and rows equal prefill() of each
  // alone up to the accumulation order of products over more rows (tests/test_decode_step.cpp).
  // Every sequence is checked (check_extend) before anything runs, so a refused call leaves every
  // state as it was; an error after that leaves them all unusable. decode_batch is this with
  // one id per sequence.
  std::vector<float> prefill_batch(std::span<const std::span<const int32_t>> ids,
                                   std::span<SequenceState* const> states) const;
  // Throws what prefill(ids, state) would refuse before running: a state of another model, a
  // sequence past max_position_embeddings (kRequestTooLarge), an id outside the vocabulary.
  void check_extend(std::span<const int32_t> ids, const SequenceState& state) const;

 private:
  std::vector<float> extend(std::span<const int32_t> ids, SequenceState& state) const;
  // Host RoPE tables of text positions first … first + L − 1, or of explicit M-RoPE positions,
  // written at cos/sin [L, rotary_dim / 2].
  void rope_rows(std::span<const int32_t> positions, int64_t first, int64_t L, float* cos, float* sin) const;
  // Runs layer `index` over one sequence's rows h [L, hidden] in steps, continuing `state`
  // (one sequence) from token `begin`.
  void run_layer_from(int64_t index, float* h, int64_t L, const Tensor& cos, const Tensor& sin,
                      DecoderLayer::State& state, int64_t begin, const DecoderLayer::MlpInputObserver* mlp_input,
                      float* normed = nullptr, float* residual = nullptr, bool pending = false) const;
  // The layer after `index`, or nullptr after the last (DecoderLayer::Carry::next).
  const DecoderLayer* layer_after(int64_t index) const;
  // The embedding rows and RoPE tables of ids at positions (or text positions from `first`),
  // in the backend's memory.
  Sequence rows_in(std::span<const int32_t> ids, std::span<const int32_t> positions,
                   std::span<const EmbeddingOverride> overrides, int64_t first) const;
  // h[rows, hidden] ← the final zero-centred RMSNorm of h, in place.
  void final_norm(float* h, int64_t rows) const;
  // An Error naming the first id outside the vocabulary and its position.
  void check_ids(std::span<const int32_t> ids) const;
  // Checks ids against the vocabulary and writes their embedding rows (then the overrides) into h
  // [ids.size(), hidden] in the backend's memory: by the backend's embedding_rows where no row is
  // overridden, else on the host and copied in once.
  void embed_rows(std::span<const int32_t> ids, std::span<const EmbeddingOverride> overrides, const Tensor& h) const;

  TextConfig config_;
  const Backend& backend_;
  BackboneOptions options_;
  RopeSpec rope_;
  LinearWeight embed_tokens_;  // [vocab, hidden], rows read on demand
  std::vector<DecoderLayer> layers_;
  Tensor final_norm_;
};

}  // namespace stave
