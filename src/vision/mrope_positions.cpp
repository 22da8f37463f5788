#include "vision/mrope_positions.h"

#include <algorithm>
#include <array>
#include <string>

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

  // Videos are split into one t = 1 grid per temporal group (timestamps separate them).
  std::vector<std::array<int64_t, 3>> video_groups;
  if (media)
    for (const auto& g : media->video_grid_thw)
      for (int64_t f = 0; f < g[0]; ++f) video_groups.push_back({1, g[1], g[2]});

  int64_t cur = 0, max_pos = -1;
  size_t image = 0, video = 0;
  int64_t p = 0;
  auto type_at = [&](int64_t q) -> int32_t {
    return q >= media_begin && q < media_end ? media->mm_token_type_ids[q - media_begin] : 0;
  };
  while (p < seq_len) {
    const int32_t type = type_at(p);
    if (type == 0) {
      T[p] = H[p] = W[p] = static_cast<int32_t>(cur);
      max_pos = std::max(max_pos, cur);
      ++cur;
      ++p;
      continue;
    }
    const char* what = type == 1 ? "image" : "video frame group";
    const auto& grids = type == 1 ? media->image_grid_thw : video_groups;
    size_t& next = type == 1 ? image : video;
    if (next >= grids.size()) throw Error(ErrorKind::kInternal, std::string("more ") + what + " token groups than grids");
    const auto& g = grids[next++];
    const int64_t t = g[0], h2 = g[1] / merge, w2 = g[2] / merge, n = t * h2 * w2;
    int64_t run = 0;
    while (p + run < media_end && type_at(p + run) == type) ++run;
    if (run < n)
      throw Error(ErrorKind::kInternal, std::string(what) + " " + std::to_string(next) + " has " +
                                            std::to_string(run) + " tokens, its grid needs " + std::to_string(n));
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
  if (media && (image != media->image_grid_thw.size() || video != video_groups.size()))
    throw Error(ErrorKind::kInternal, "the media segment has " + std::to_string(image) + " image and " +
                                          std::to_string(video) + " video frame token groups for " +
                                          std::to_string(media->image_grid_thw.size()) + " images and " +
                                          std::to_string(video_groups.size()) + " video frame groups");
  out.rope_delta = max_pos + 1 - seq_len;
  return out;
}

}  // namespace stave
