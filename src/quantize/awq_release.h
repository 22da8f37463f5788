// AWQ for a whole BF16 release (`stave quantize --awq`): tokenizes the calibration file with the
// release's tokenizer, runs its float backbone layer by layer to capture every MLP's input
// (awq_backbone_source.h), and searches the smoothing and clipping of each MLP (awq.h) for the
// linears that will be quantized. The edits are folded in by quantize_release.
#pragma once
#include <string>
#include <vector>

#include "quantize/awq.h"
#include "quantize/calibration.h"
#include "quantize/weight_edits.h"

namespace stave::quantize {

struct AwqReleaseOptions {
  std::string in_dir;                 // BF16 release folder
  std::vector<std::string> exclude;   // as for quantize_release: these linears are not smoothed
  std::string calib_path;             // FILE.txt | FILE.jsonl (calibration.h)
  CalibrationOptions calibration;
  AwqOptions awq;
};

struct AwqReleaseResult {
  WeightEdits edits;
  std::vector<AwqLayerReport> layers;
  int64_t calibration_samples = 0, calibration_tokens = 0;
};

AwqReleaseResult awq_release(const AwqReleaseOptions& options);

}  // namespace stave::quantize
