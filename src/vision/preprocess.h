// The image processor of the reference: transformers 5.17's `Qwen2VLImageProcessor`, which in
// 5.x is the torchvision backend (the PIL one is `Qwen2VLImageProcessorPil`). For each image:
//   smart_resize -> torchvision resize of the uint8 CHW tensor (bicubic, antialias=True; on
//   CPU that is ATen's separable uint8 kernel with int16 fixed-point weights, horizontal pass
//   then vertical pass, each rounded and clamped to uint8) -> fused rescale+normalize in fp32
//   ((x - mean/r) / (std/r), r = rescale_factor) -> frames padded to temporal_patch_size by
//   repeating the last one -> flattened to [grid_t*grid_h*grid_w, C*T*P*P] in merge-block-major
//   order. docs/vision.md has the derivation.
//
// Frames are the unit (a still image is one frame), so that video can reuse patchify_frames.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "vision/image_decode.h"

namespace stave {

struct ResizedSize {
  int64_t height = 0;
  int64_t width = 0;
};

// transformers' smart_resize (5.17): Python round() (ties to even) to a multiple of `factor`,
// then the max_pixels branch (floor, at least `factor`) or the min_pixels branch (ceil).
// Throws stave::Error(kInvalidRequest) "absolute aspect ratio must be smaller than 200, got X"
// with X spelled as Python's repr.
ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels);

enum class ResampleFilter { kBilinear, kBicubic };
// PIL resample id -> the filter torchvision uses for it (2 bilinear, 3 bicubic, 1 lanczos ->
// bicubic as torchvision substitutes). Others throw kUnsupported.
ResampleFilter resample_filter_from_pil(int pil_id);

// torchvision.transforms.v2.functional.resize(uint8 tensor, [out_h, out_w], filter,
// antialias=True) on CPU. Returns the input unchanged when the size is unchanged.
RgbImage resize_antialias_u8(const RgbImage& in, int64_t out_h, int64_t out_w, ResampleFilter filter);

// The processor's output for one image (or one video clip).
struct VisionPatches {
  std::vector<float> pixel_values;     // [rows, C*T*P*P]
  int64_t rows = 0;
  int64_t row_size = 0;                 // C*T*P*P
  std::array<int64_t, 3> grid_thw{};    // in patch units
};

// Rescale/normalize of already-resized frames and the patch flattening. All frames must have
// the same size, a multiple of patch_size*merge_size.
VisionPatches patchify_frames(const std::vector<const RgbImage*>& frames, const ImageProcessorConfig& config);

// The whole processor for one still image (convert to RGB was done by the decoder).
VisionPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& config);

// Merged tokens the LLM sees for one item: t*h*w / merge².
int64_t merged_token_count(const std::array<int64_t, 3>& grid_thw, int64_t merge_size);

}  // namespace stave
