#include "quantize/awq_release.h"

#include <set>

#include "io/release.h"
#include "model/backbone.h"
#include "quantize/awq_backbone_source.h"
#include "quantize/quantize_release.h"
#include "stave/errors.h"
#include "text/tokenizer.h"

namespace stave::quantize {

AwqReleaseResult awq_release(const AwqReleaseOptions& options) {
  std::unique_ptr<Release> release = open_release(options.in_dir);
  if (!release->config.quantization_config_json.empty())
    throw Error(ErrorKind::kInvalidRequest, options.in_dir +
                                                " is already quantized (config.json has quantization_config): AWQ "
                                                "needs the BF16 release");
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_file(release->tokenizer_path);
  AwqReleaseResult result;
  const std::vector<std::vector<int32_t>> samples = read_calibration(
      options.calib_path, options.calibration, [&](std::string_view text) { return tokenizer->encode(text); });
  result.calibration_samples = static_cast<int64_t>(samples.size());
  for (const auto& s : samples) result.calibration_tokens += static_cast<int64_t>(s.size());

  const LinearSelection selection = select_linears(release->config, options.exclude);
  const std::set<std::string> quantized(selection.quantized.begin(), selection.quantized.end());

  // The calibration forward is the fp32 reference: AWQ's statistics should not depend on the
  // CPU the quantizer runs on, and a quantized release must be reproducible byte for byte.
  const Backbone backbone(*release, reference_backend());
  BackboneMlpInputSource source(backbone, samples);
  result.edits = compute_awq(release->config, release->weights, source, quantized, options.awq, &result.layers);
  return result;
}

}  // namespace stave::quantize
