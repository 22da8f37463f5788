// Where a record's images and videos sit in its token sequence: what the media path (src/decide's
// media_tokens) fills and the backbone's M-RoPE positions (mrope_positions.h) read.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace stave {

struct EncodedMedia {
  std::vector<std::array<int64_t, 3>> image_grid_thw;  // per image, in patch units
  std::vector<std::array<int64_t, 3>> video_grid_thw;  // per video (t = temporal groups)
  std::vector<int32_t> mm_token_type_ids;              // over the media segment: 0 text, 1 image, 2 video
  int64_t token_offset = 0;                            // prefix length: where media starts
};

}  // namespace stave
