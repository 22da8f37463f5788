// AWQ (activation-aware weight quantization) as AMD Quark's qwen3_5 recipe runs it: for every decoder layer, only the MLP is smoothed —
//   pair 1: post_attention_layernorm -> mlp.gate_proj + mlp.up_proj (the loss is the MLP's output)
//   pair 2: mlp.up_proj -> mlp.down_proj (the loss is down_proj's output)
// For each pair: x_mean = mean |x| per input channel over the calibration tokens; for ratio
// i/20 (i = 0..19): s = clamp(x_mean^ratio, min 1e-4) / sqrt(max(s)·min(s)); the ratio whose
// quantized module output is closest (MSE) to the float output wins. The scales are folded
// into the weights (zero-centred norm: w' = (w + 1)/s − 1; gate/up columns × s1; up rows / s2;
// down columns × s2), then each MLP linear's weights are clipped per 32-group (grid of 20,
// shrink down to 0.5, on at most 512 sampled tokens), and finally quantized.
//
// Activations come from an MlpInputSource: the input of each layer's MLP (the output of
// post_attention_layernorm) over all calibration tokens, computed with the unquantized model,
// layer by layer so that only one layer's activations are held at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/tensor_store.h"
#include "formats/mxfp4.h"
#include "quantize/weight_edits.h"

namespace stave::quantize {

struct AwqOptions {
  int n_grid = 20;                  // smoothing ratios i / n_grid, i = 0 .. n_grid-1
  int clip_n_grid = 20;             // clip shrink steps of 1/clip_n_grid ...
  double clip_max_shrink = 0.5;     // ... down to this fraction (exclusive)
  int64_t clip_sample_tokens = 512; // tokens used by the clip search (Quark's strided sample)
  // Whether the search quantizes the activations too (W4A4, how the MXFP4 release runs), or
  // only the weights (W4A16, as Quark's AWQ hooks do: its input quantizers are off during the
  // search). Both measure the error in the deployed form, x/s against Q(W·s).
  bool quantize_inputs = true;
  mxfp4::ScaleMode scale_mode = mxfp4::ScaleMode::kEven;
  bool clip = true;
};

// Calibration activations, layer by layer.
class MlpInputSource {
 public:
  virtual ~MlpInputSource() = default;
  // Calls fn(layer, x, tokens) for layer 0, 1, ... in order; x is [tokens, hidden], the MLP
  // input of that layer over every calibration token, valid during the call.
  virtual void for_each_layer(const std::function<void(int64_t layer, const float* x, int64_t tokens)>& fn) = 0;
};

// One MLP's weights as the model holds them (values of the bf16 tensors, in fp32).
struct MlpWeights {
  int64_t hidden = 0, inter = 0;
  std::vector<float> gate, up;  // [inter, hidden]
  std::vector<float> down;      // [hidden, inter]
  std::vector<float> norm;      // post_attention_layernorm.weight [hidden] (zero-centred: y = x̂·(1 + w))
  bool bf16 = true;             // round edited weights to bf16 like the bf16 model does
};

// Which of an MLP's linears will be quantized (AWQ smooths and clips only those).
struct MlpQuantized {
  bool gate = true, up = true, down = true;
};

struct MlpAwqResult {
  bool smoothed_gate_up = false, smoothed_down = false;
  float ratio_gate_up = 0, ratio_down = 0;
  std::vector<float> s_gate_up;  // [hidden] (empty when not smoothed)
  std::vector<float> s_down;     // [inter]
  double loss_gate_up_plain = 0, loss_gate_up_best = 0;  // MSE at ratio 0 (no smoothing) and at the best ratio
  double loss_down_plain = 0, loss_down_best = 0;
  LinearEdit gate, up, down;     // what to apply to each weight
  std::vector<float> norm;       // the new post_attention_layernorm.weight (empty when unchanged)
};

// AWQ for one MLP on its calibration inputs x [tokens, hidden].
MlpAwqResult awq_mlp(const MlpWeights& w, const float* x, int64_t tokens, const AwqOptions& options,
                     MlpQuantized quantized = {});

// The clip search for one linear W [out, in] (already smoothed) on its inputs x [tokens, in]
// (already divided by the smoothing scales): the best max |w| per row and 32-group.
std::vector<float> awq_clip(const float* w, int64_t out, int64_t in, const float* x, int64_t tokens,
                            const AwqOptions& options);

struct AwqLayerReport {
  int64_t layer = 0;
  float ratio_gate_up = 0, ratio_down = 0;
  double loss_gate_up_plain = 0, loss_gate_up_best = 0, loss_down_plain = 0, loss_down_best = 0;
};

// Runs AWQ over every decoder layer of a model whose tensors are in `weights`, with the MLP
// inputs from `source`, for the linears in `quantized` (names without ".weight"). Returns the
// edits to fold in when quantizing (quantize_release's `edits`). `report`, if given, receives
// one entry per layer.
WeightEdits compute_awq(const ModelConfig& config, const TensorStore& weights, MlpInputSource& source,
                        const std::set<std::string>& quantized, const AwqOptions& options,
                        std::vector<AwqLayerReport>* report = nullptr);

}  // namespace stave::quantize
