// The Qwen3.5 backbone resident on the GPU: every weight uploaded once (MXFP4 packed, BF16 as
// BF16), the whole prefill run layer by layer on device buffers with the ops of
// device_ops.h, and only the final-normed hidden states copied back for the joint head.
// Same contract as stave::Backbone::forward (src/model/backbone.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "io/release.h"
#include "model/backbone.h"
#include "stave/options.h"

namespace stave::cuda {

class CudaBackbone {
 public:
  // `release` must outlive the backbone (the embedding table is read from its mapping).
  CudaBackbone(const Release& release, Precision precision);
  ~CudaBackbone();

  std::vector<float> forward(std::span<const int32_t> ids, std::span<const int32_t> positions = {},
                             std::span<const EmbeddingOverride> overrides = {}) const;

  // Batched prefill: the sequences packed into one forward (the linear layers, norms and
  // element-wise ops run over all their rows at once; the causal conv, the gated delta rule and
  // attention keep each sequence apart, the delta rule's recurrences running side by side).
  // One result per sequence, each the same as forward() of that sequence alone, up to the
  // fp32 accumulation order of the larger products.
  std::vector<std::vector<float>> forward_batch(std::span<const BackboneSequence> sequences) const;

  // forward_batch without the copies: the hidden states stay in the backbone's page-locked
  // staging (a fresh 168 MB vector costs ~95 ms of page faults at 8192 tokens). Two stagings
  // take turns, so a second prefill can run while the first one's head still reads its rows.
  LentHiddenStates forward_lent(std::span<const BackboneSequence> sequences) const;

  // Bytes of weights resident on the GPU.
  size_t weight_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace stave::cuda
