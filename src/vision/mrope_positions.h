// The 3-row M-RoPE position ids of a whole sequence, as transformers' get_rope_index for
// Qwen3.5: a text token gets (cur, cur, cur) and cur += 1; the tokens of one
// image with grid (t, h, w), merged h2 x w2, get (cur + frame, cur + row, cur + col) in raster
// order, then cur += max(t, h2, w2) (max(h2, w2) for a still image). Without media the ids
// are a plain arange in all three rows.
#pragma once
#include <cstdint>
#include <vector>

#include "vision/encoded_media.h"

namespace stave {

struct MropePositions {
  std::vector<int32_t> ids;  // [3, seq_len], rows T, H, W (the layout Backbone::forward takes)
  int64_t rope_delta = 0;    // max(pos) + 1 - seq_len: decode steps continue from here
};

// `media` (may be null) places the media segment at media->token_offset; its
// mm_token_type_ids say which positions are image (1) and video (2) tokens. Each video grid
// is split into one t = 1 grid per temporal group, as get_rope_index does (timestamps separate
// them). Throws stave::Error(kInternal) when the token counts disagree with the grids.
MropePositions mrope_position_ids(int64_t seq_len, const EncodedMedia* media, int64_t spatial_merge_size);

}  // namespace stave
