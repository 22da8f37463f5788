// The joint schema head's work over all L positions, behind one object so that a backend can keep the [L, width] memory where
// it computes: the LayerNorm of the backbone's hidden states, the memory projection, and every
// attention of the option queries (routing layers, over the layer-normalised memory) and the
// field queries (decoder cross-attention, over the raw memory). Everything else the head does is
// N- or Q-sized (options, questions) and stays with the head.
//
// The host implementation below is the oracle and the CPU path: it runs the reference ops (and
// the backend's matmul_nt for the L-row products) exactly as the head did before this split.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ops/multihead_attention.h"
#include "util/token_span.h"

namespace stave {

class Backend;

// nn.LayerNorm's parameters, viewed (owned by the head's weights).
struct LayerNormView {
  const float* weight = nullptr;
  const float* bias = nullptr;
  int64_t dim = 0;
  float eps = 1e-5f;
};

// One attention over the memory. Routing layers normalise the memory first (their
// memory_norm); the decoder layers' cross-attention reads it as projected.
struct HeadMemoryAttention {
  bool normalise_memory = false;
  LayerNormView memory_norm;
  ref::MultiheadAttentionWeights attention;  // embed_dim = the head's width
};

struct HeadMemorySpec {
  int64_t hidden_size = 0, width = 0;
  LayerNormView hidden_norm;                    // over hidden_size
  const float* memory_projection = nullptr;     // [width, hidden_size], no bias
  std::vector<HeadMemoryAttention> attentions;  // routing layers, then decoder layers
};

// The backbone's final hidden states [L, hidden_size] as the head receives them: in host memory,
// or in the memory of the GPU whose backend builds the head memory (a device backbone lends them
// there, so the [L, hidden] rows never make the round trip through the host), or both. A plain
// pointer is host memory.
struct HiddenRows {
  const float* host = nullptr;
  const float* device = nullptr;
  HiddenRows() = default;
  HiddenRows(const float* host_rows) : host(host_rows) {}  // NOLINT(google-explicit-constructor)
  static HiddenRows on_device(const float* device_rows) {
    HiddenRows r;
    r.device = device_rows;
    return r;
  }
  bool empty() const { return !host && !device; }
};

class HeadMemory {
 public:
  virtual ~HeadMemory() = default;
  virtual int64_t hidden_size() const = 0;
  // out[end − begin, hidden_size] = LayerNorm(hidden rows [begin, end)); 0 <= begin < end <= L.
  virtual void normed_hidden_rows(int64_t begin, int64_t end, float* out) const = 0;
  // The rows of several spans (each 0 <= begin < end <= L) one span after another: out holds
  // Σ (end − begin) rows of hidden_size, each the same as normed_hidden_rows gives. A backend
  // whose rows live elsewhere brings them in one transfer; this default asks span by span.
  virtual void normed_hidden_spans(std::span<const Span> spans, float* out) const;
  // out[rows, width] = MHA_a(query, memory_a): attention `a` of the spec with its keys and values
  // projected from the (normalised) memory; `query` rows are already normalised by the caller.
  // Each attention is computed when asked; asking twice recomputes it.
  virtual void attend(size_t a, const float* query, int64_t rows, float* out) const = 0;
};

// K = x·Wkᵀ + bk and V = x·Wvᵀ + bv of a packed nn.MultiheadAttention (ref::mha_project_key_values)
// through `backend.matmul_nt`, as one product: the key and value row blocks of in_proj are
// adjacent, so one product with 2E outputs makes both (each output is the same dot product as in
// two products; one pass over x). With `q` [rows, E], the query block, adjacent before them, comes
// out of the same product too (3E outputs).
ref::ProjectedKeyValues project_key_values(const Backend& backend, const ref::MultiheadAttentionWeights& w,
                                           const float* x, int64_t rows, float* q = nullptr);

// The host implementation: hidden states normalised with ref::layer_norm, the memory and the
// key/value projections through `backend.matmul_nt`, the attention with ref::mha_attend.
// `hidden` [L, hidden_size] (host memory: hidden.host) and the spec's weights must outlive the
// returned object; hidden states only on a device are an internal error here.
std::unique_ptr<HeadMemory> host_head_memory(const Backend& backend, const HeadMemorySpec& spec, HiddenRows hidden,
                                             int64_t L);

}  // namespace stave
