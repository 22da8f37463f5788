// The rows that a decoder layer processes in one step: one or more sequences packed one after
// another (a batched prefill), or a run of consecutive tokens of one sequence (one step of the
// layer-major prefill, or a decode step). Layers carry each sequence's state (conv history,
// delta-rule state, KV cache) from step to step, so a sequence may be cut anywhere.
#pragma once
#include <cstdint>
#include <vector>

namespace stave {

// Rows [row0, row0 + tokens) of the step continue sequence b (the b-th slice) of the layer
// state at position `begin` (the tokens it has seen before).
struct SequenceSlice {
  int64_t row0 = 0;
  int64_t tokens = 0;
  int64_t begin = 0;
};

struct TokenBatch {
  int64_t rows = 0;
  // One per sequence of the layer state, in row order, covering [0, rows) without gaps.
  std::vector<SequenceSlice> slices;
  // [rows, rotary_dim/2] RoPE tables of these rows, in the backend's memory.
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;

  // Row offsets of the slices and the end: slices.size() + 1 values.
  std::vector<int64_t> starts() const {
    std::vector<int64_t> s;
    s.reserve(slices.size() + 1);
    for (const SequenceSlice& q : slices) s.push_back(q.row0);
    s.push_back(rows);
    return s;
  }
};

}  // namespace stave
