// The two position signals of the Qwen3.5 vision tower (transformers' Qwen3_5VisionModel), per item
// grid (t, h, w) in patch units, in the processor's merge-block-major patch order:
//  - learned absolute embeddings, bilinearly resampled (align_corners=True) from the
//    sqrt(num_position_embeddings)² table, computed as transformers 5.17's
//    fast_pos_embed_interpolate does (torch.linspace in fp32, fp32 weights, 4-term fp32 sum);
//  - 2-D rotary angles: head_dim/2 frequencies theta^(-2j/(head_dim/2)), the first half driven
//    by the patch row, the second by the column; cos/sin of [f, f] over the full head_dim.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace stave {

// torch.linspace(start, end, steps) in fp32 on CPU (scalar path: the first half counts up from
// start, the second half down from end).
std::vector<float> torch_linspace_f32(float start, float end, int64_t steps);

// [t*h*w, dim]: table is [side*side, dim] row-major.
std::vector<float> interpolated_position_embeddings(const std::vector<float>& table, int64_t side, int64_t dim,
                                                    const std::array<int64_t, 3>& grid, int64_t merge_size);

// The (row, col) of each patch of one item in merge-block-major order, repeated per frame.
std::vector<std::array<int64_t, 2>> patch_coordinates(const std::array<int64_t, 3>& grid, int64_t merge_size);

// cos and sin [t*h*w, head_dim] for one item.
struct RotaryTables {
  std::vector<float> cos, sin;
};
RotaryTables vision_rotary(const std::array<int64_t, 3>& grid, int64_t merge_size, int64_t head_dim, double theta);

}  // namespace stave
