#include "vision/vision_embeddings.h"

#include <algorithm>
#include <cmath>

#include "ops/torch_cpu_order.h"
#include "stave/errors.h"

namespace stave {

std::vector<float> torch_linspace_f32(float start, float end, int64_t steps) {
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  if (steps == 1) v[0] = start;
  if (steps <= 1) return v;
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < halfway ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  return v;
}

std::vector<std::array<int64_t, 2>> patch_coordinates(const std::array<int64_t, 3>& g, int64_t m) {
  const int64_t t = g[0], h = g[1], w = g[2];
  std::vector<std::array<int64_t, 2>> out;
  out.reserve(static_cast<size_t>(t * h * w));
  for (int64_t f = 0; f < t; ++f)
    for (int64_t bh = 0; bh < h / m; ++bh)
      for (int64_t bw = 0; bw < w / m; ++bw)
        for (int64_t ih = 0; ih < m; ++ih)
          for (int64_t iw = 0; iw < m; ++iw) out.push_back({bh * m + ih, bw * m + iw});
  return out;
}

std::vector<float> interpolated_position_embeddings(const std::vector<float>& table, int64_t side, int64_t dim,
                                                    const std::array<int64_t, 3>& grid, int64_t merge_size) {
  const int64_t h = grid[1], w = grid[2];
  const std::vector<float> hs = torch_linspace_f32(0.0f, static_cast<float>(side - 1), h);
  const std::vector<float> ws = torch_linspace_f32(0.0f, static_cast<float>(side - 1), w);
  // Raster-order embeddings of the h x w grid first, as the reference computes them.
  std::vector<float> raster(static_cast<size_t>(h * w * dim));
  for (int64_t r = 0; r < h; ++r) {
    const int64_t r0 = static_cast<int64_t>(hs[r]), r1 = std::min(r0 + 1, side - 1);
    const float dh = hs[r] - static_cast<float>(r0);
    for (int64_t c = 0; c < w; ++c) {
      const int64_t c0 = static_cast<int64_t>(ws[c]), c1 = std::min(c0 + 1, side - 1);
      const float dw = ws[c] - static_cast<float>(c0);
      const float w00 = (1.0f - dh) * (1.0f - dw), w01 = (1.0f - dh) * dw, w10 = dh * (1.0f - dw), w11 = dh * dw;
      const float* e00 = table.data() + (r0 * side + c0) * dim;
      const float* e01 = table.data() + (r0 * side + c1) * dim;
      const float* e10 = table.data() + (r1 * side + c0) * dim;
      const float* e11 = table.data() + (r1 * side + c1) * dim;
      float* out = raster.data() + (r * w + c) * dim;
      for (int64_t k = 0; k < dim; ++k) {
        float acc = e00[k] * w00;
        acc = acc + e01[k] * w01;
        acc = acc + e10[k] * w10;
        acc = acc + e11[k] * w11;
        out[k] = acc;
      }
    }
  }
  const auto coords = patch_coordinates(grid, merge_size);
  std::vector<float> out(coords.size() * static_cast<size_t>(dim));
  for (size_t i = 0; i < coords.size(); ++i)
    std::copy_n(raster.data() + (coords[i][0] * w + coords[i][1]) * dim, dim, out.data() + i * dim);
  return out;
}

RotaryTables vision_rotary(const std::array<int64_t, 3>& grid, int64_t merge_size, int64_t head_dim, double theta) {
  if (head_dim % 4 != 0)
    throw Error(ErrorKind::kUnsupported, "vision head_dim must be a multiple of 4, got " + std::to_string(head_dim));
  const int64_t dim = head_dim / 2;  // VisionRotaryEmbedding(head_dim // 2)
  const int64_t nfreq = dim / 2;
  std::vector<float> inv(static_cast<size_t>(nfreq));
  for (int64_t j = 0; j < nfreq; ++j) {
    const float e = static_cast<float>(2 * j) / static_cast<float>(dim);
    inv[j] = 1.0f / std::pow(static_cast<float>(theta), e);
  }
  const auto coords = patch_coordinates(grid, merge_size);
  RotaryTables t;
  t.cos.resize(coords.size() * static_cast<size_t>(head_dim));
  t.sin.resize(t.cos.size());
  for (size_t i = 0; i < coords.size(); ++i) {
    float* c = t.cos.data() + i * head_dim;
    float* s = t.sin.data() + i * head_dim;
    for (int64_t j = 0; j < nfreq; ++j) {
      const float fr = static_cast<float>(coords[i][0]) * inv[j];
      const float fc = static_cast<float>(coords[i][1]) * inv[j];
      // emb = [rows(nfreq), cols(nfreq)] then cat((emb, emb))
      for (int64_t half = 0; half < 2; ++half) {
        c[half * dim + j] = ref::torch_order::cos(fr);
        s[half * dim + j] = ref::torch_order::sin(fr);
        c[half * dim + nfreq + j] = ref::torch_order::cos(fc);
        s[half * dim + nfreq + j] = ref::torch_order::sin(fc);
      }
    }
  }
  return t;
}

}  // namespace stave
