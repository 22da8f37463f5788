// The calibration activations AWQ needs (src/quantize/awq.h), produced by running a release's
// float backbone on calibration token sequences layer by layer, as Quark does: every sequence
// goes through layer l (its MLP input captured) before any goes through layer l + 1, so only
// the residual streams of the calibration set and one layer's MLP inputs are held at a time
// (for the 27B at 128 × 512 tokens: 1.3 GiB each, fp32).
#pragma once
#include <cstdint>
#include <vector>

#include "model/backbone.h"
#include "quantize/awq.h"

namespace stave::quantize {

class BackboneMlpInputSource : public MlpInputSource {
 public:
  // `backbone` and `samples` must outlive the source; each sample is one sequence of ids.
  BackboneMlpInputSource(const Backbone& backbone, const std::vector<std::vector<int32_t>>& samples);

  void for_each_layer(const std::function<void(int64_t layer, const float* x, int64_t tokens)>& fn) override;

 private:
  const Backbone& backbone_;
  const std::vector<std::vector<int32_t>>& samples_;
};

}  // namespace stave::quantize
