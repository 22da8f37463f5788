#include "quantize/weight_edits.h"

#include <algorithm>

#include "formats/mxfp4.h"
#include "util/bf16.h"

namespace stave::quantize {

void apply_linear_edit_row(const LinearEdit& e, int64_t r, int64_t in, float* w, bool round_bf16) {
  auto rnd = [round_bf16](float v) { return round_bf16 ? round_to_bf16(v) : v; };
  if (!e.col_mul.empty())
    for (int64_t c = 0; c < in; ++c) w[c] = rnd(w[c] * e.col_mul[c]);
  if (!e.row_div.empty()) {
    const float d = e.row_div[r];
    for (int64_t c = 0; c < in; ++c) w[c] = rnd(w[c] / d);
  }
  if (!e.clip_max.empty()) {
    const int64_t groups = in / mxfp4::kBlock;
    for (int64_t g = 0; g < groups; ++g) {
      const float m = e.clip_max[r * groups + g];
      for (int64_t c = g * mxfp4::kBlock; c < (g + 1) * mxfp4::kBlock; ++c) w[c] = std::clamp(w[c], -m, m);
    }
  }
}

}  // namespace stave::quantize
