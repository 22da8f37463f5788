#include "quantize/awq_backbone_source.h"

#include <algorithm>

#include "stave/errors.h"

namespace stave::quantize {

BackboneMlpInputSource::BackboneMlpInputSource(const Backbone& backbone,
                                               const std::vector<std::vector<int32_t>>& samples)
    : backbone_(backbone), samples_(samples) {}

void BackboneMlpInputSource::for_each_layer(
    const std::function<void(int64_t layer, const float* x, int64_t tokens)>& fn) {
  const int64_t H = backbone_.hidden_size();
  int64_t total = 0;
  for (const auto& s : samples_) total += static_cast<int64_t>(s.size());
  if (total == 0) throw Error(ErrorKind::kInvalidRequest, "AWQ calibration has no tokens");

  std::vector<Backbone::Sequence> sequences;
  sequences.reserve(samples_.size());
  for (const auto& s : samples_) sequences.push_back(backbone_.start(s));

  std::vector<float> x(static_cast<size_t>(total * H));
  for (int64_t layer = 0; layer < backbone_.num_layers(); ++layer) {
    int64_t filled = 0;
    DecoderLayer::MlpInputObserver capture = [&](const float* in, int64_t tokens) {
      std::copy(in, in + tokens * H, x.begin() + filled * H);
      filled += tokens;
    };
    for (Backbone::Sequence& seq : sequences) backbone_.run_layer(layer, seq, &capture);
    if (filled != total)
      throw Error(ErrorKind::kInternal, "AWQ calibration captured " + std::to_string(filled) + " of " +
                                            std::to_string(total) + " tokens at layer " + std::to_string(layer));
    fn(layer, x.data(), total);
  }
}

}  // namespace stave::quantize
