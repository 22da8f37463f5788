// Changes to a model's weights made before quantization (AWQ folds its smoothing scales and
// clipping into the weights, as Quark's AWQ does). The quantizer applies them while it
// streams each tensor, so only the small per-channel vectors are held, never the weights.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stave::quantize {

// Edits of one linear weight W [out, in], applied in this order, each result rounded to bf16
// when the model is bf16 (as torch's in-place ops on a bf16 tensor do):
//   W[:, c] *= col_mul[c]      (scale_ln_fcs / scale_fc_fc on the following layer)
//   W[r, :] /= row_div[r]      (scale_fc_fc on the preceding layer)
//   W[r, g*32 .. g*32+31] clamped to ±clip_max[r * (in/32) + g]   (AWQ clip)
struct LinearEdit {
  std::vector<float> col_mul;   // [in] or empty
  std::vector<float> row_div;   // [out] or empty
  std::vector<float> clip_max;  // [out * in/32] or empty
};

struct WeightEdits {
  std::map<std::string, LinearEdit> linears;          // by layer name (no ".weight")
  std::map<std::string, std::vector<float>> tensors;  // whole-tensor replacements (norm weights), by tensor name
  bool empty() const { return linears.empty() && tensors.empty(); }
};

// Applies `e` to row r of a weight with `in` columns (values in `w`, modified in place).
void apply_linear_edit_row(const LinearEdit& e, int64_t r, int64_t in, float* w, bool round_bf16);

}  // namespace stave::quantize
