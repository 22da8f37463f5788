#include "vision/mrope_positions.h"

#include <algorithm>

#include "stave/errors.h"

namespace stave {

MropePositions mrope_position_ids(int64_t seq_len, const EncodedMedia* media, int64_t merge) {
  MropePositions out;
  out.ids.assign(static_cast<size_t>(3 * seq_len), 0);
  int32_t* T = out.ids.data();
  int32_t* H = T + seq_len;
  int32_t* W = H + seq_len;

  int64_t media_begin = seq_len, media_end = seq_len;
  if (media) {
    media_begin = media->token_offset;
    media_end = media_begin + static_cast<int64_t>(media->mm_token_type_ids.size());
    if (media_begin < 0 || media_end > seq_len)
      throw Error(ErrorKind::kInternal, "media segment [" + std::to_string(media_begin) + ", " +
                                            std::to_string(media_end) + ") is outside the sequence of " +
                                            std::to_string(seq_len));
  }

  int64_t cur = 0, max_pos = -1;
  size_t image = 0;
  int64_t p = 0;
  while (p < seq_len) {
    const bool is_image = p >= media_begin && p < media_end && media->mm_token_type_ids[p - media_begin] == 1;
    if (!is_image) {
      T[p] = H[p] = W[p] = static_cast<int32_t>(cur);
      max_pos = std::max(max_pos, cur);
      ++cur;
      ++p;
      continue;
    }
    if (image >= media->image_grid_thw.size())
      throw Error(ErrorKind::kInternal, "more image token groups than images");
    const auto& g = media->image_grid_thw[image++];
    const int64_t t = g[0], h2 = g[1] / merge, w2 = g[2] / merge, n = t * h2 * w2;
    int64_t run = 0;
    while (p + run < media_end && media->mm_token_type_ids[p + run - media_begin] == 1) ++run;
    if (run < n)
      throw Error(ErrorKind::kInternal, "image " + std::to_string(image) + " has " + std::to_string(run) +
                                            " tokens, its grid needs " + std::to_string(n));
    for (int64_t f = 0; f < t; ++f)
      for (int64_t r = 0; r < h2; ++r)
        for (int64_t c = 0; c < w2; ++c, ++p) {
          T[p] = static_cast<int32_t>(cur + f);
          H[p] = static_cast<int32_t>(cur + r);
          W[p] = static_cast<int32_t>(cur + c);
        }
    // The next text starts after the largest position used: cur + max(t, h2, w2).
    const int64_t advance = std::max({t, h2, w2});
    max_pos = std::max(max_pos, cur + advance - 1);
    cur += advance;
  }
  if (media && image != media->image_grid_thw.size())
    throw Error(ErrorKind::kInternal, "the media segment has " + std::to_string(image) + " image token groups for " +
                                          std::to_string(media->image_grid_thw.size()) + " images");
  out.rope_delta = max_pos + 1 - seq_len;
  return out;
}

}  // namespace stave
