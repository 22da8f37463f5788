// Video inputs (issue 28): the processor's frame arithmetic (sampling, smart_resize,
// timestamps) against values worked out by hand from its rules, FFmpeg decoding of videos made
// here with FFmpeg's encoders (lossless ones must come back bit-exact), hostile files, the
// request forms, the media segment and video M-RoPE positions. Reference values (transformers'
// own outputs) are in test_video_fixtures.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>

#include "decide/image_input.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "test_vision_util.h"
#include "text/tokenizer.h"
#include "video_test_util.h"
#include "decide/media_tokens.h"
#include "vision/mrope_positions.h"
#include "vision/video_decode.h"
#include "vision/video_media.h"
#include "vision/video_sampling.h"

namespace stave {
namespace {

VideoProcessorConfig qwen3vl_defaults() { return default_video_processor_config(ImageProcessorConfig{}); }

std::string error_of(const std::function<void()>& f, ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

// ---- sampling: int(total / fps_in * 2) clamped to [4, min(768, total)], then
// np.linspace(0, total - 1, n).round() with ties to even.
TEST(VideoSampling, FpsRuleWithAssumed24Fps) {
  const VideoProcessorConfig c = qwen3vl_defaults();
  // 48 frames: n = int(48 / 24 * 2) = 4; linspace(0, 47, 4) = 0, 15.67, 31.33, 47.
  EXPECT_EQ(sample_frame_indices(48, std::nullopt, c), (std::vector<int64_t>{0, 16, 31, 47}));
  // 240 frames at 24 fps: n = 20; step 239/19 = 12.58 -> 0, 13, 25, ...
  const auto many = sample_frame_indices(240, 24.0, c);
  ASSERT_EQ(many.size(), 20u);
  EXPECT_EQ(many[1], 13);
  EXPECT_EQ(many.back(), 239);
  // 3 frames: n = max(0, 4) clamped to the 3 there are.
  EXPECT_EQ(sample_frame_indices(3, std::nullopt, c), (std::vector<int64_t>{0, 1, 2}));
  // 1 frame: [0] (the resize then refuses t = 1).
  EXPECT_EQ(sample_frame_indices(1, std::nullopt, c), (std::vector<int64_t>{0}));
  // A file's own rate: 100 frames at 10 fps = 10 s -> 20 frames.
  EXPECT_EQ(sample_frame_indices(100, 10.0, c).size(), 20u);
  EXPECT_THROW(sample_frame_indices(0, std::nullopt, c), Error);
}

TEST(VideoSampling, RoundsHalfToEven) {
  VideoProcessorConfig c = qwen3vl_defaults();
  c.num_frames = 3;
  // linspace(0, 5, 3) = 0, 2.5, 5: numpy rounds 2.5 to 2 (half up would give 3).
  EXPECT_EQ(sample_frame_indices(6, std::nullopt, c), (std::vector<int64_t>{0, 2, 5}));
  // linspace(0, 3, 3) = 0, 1.5, 3 -> 1.5 rounds to 2.
  EXPECT_EQ(sample_frame_indices(4, std::nullopt, c), (std::vector<int64_t>{0, 2, 3}));
}

TEST(VideoSampling, MaxFramesCaps) {
  VideoProcessorConfig c = qwen3vl_defaults();
  c.max_frames = 6;
  EXPECT_EQ(sample_frame_indices(24 * 60, 24.0, c).size(), 6u);  // a minute would be 120
}

// ---- video smart_resize
TEST(VideoSmartResize, MinBranchScalesUp) {
  // 4 frames of 64x48, factor 32, min 131072: 4*64*64 = 16384 < min; beta = sqrt(131072 / 12288)
  // = 3.266; h = ceil(64*3.266/32)*32 = 224, w = ceil(48*3.266/32)*32 = 160.
  const ResizedSize s = video_smart_resize(4, 64, 48, 2, 32, 131072, 786432);
  EXPECT_EQ(s.height, 224);
  EXPECT_EQ(s.width, 160);
}

TEST(VideoSmartResize, MaxBranchUsesFrameCountNotRounded) {
  // 5 frames of 720x1280, max 786432: t_bar = round(2.5)*2 = 4 (ties to even), 4*704*1280 > max;
  // beta = sqrt(5*720*1280/786432) = 2.4206 (with t_bar's 4 it would be 2.165, giving 320x576);
  // h = floor(720/2.4206/32)*32 = 288, w = floor(1280/2.4206/32)*32 = 512.
  const ResizedSize s = video_smart_resize(5, 720, 1280, 2, 32, 131072, 786432);
  EXPECT_EQ(s.height, 288);
  EXPECT_EQ(s.width, 512);
}

TEST(VideoSmartResize, RefusesSingleFrameAndExtremeAspect) {
  EXPECT_EQ(error_of([] { video_smart_resize(1, 64, 64, 2, 32, 4096, 65536); }),
            "t:1 must be larger than temporal_factor:2");
  // Sides under the factor are scaled up first: 10x2500 -> 32x8000, ratio 250.
  EXPECT_EQ(error_of([] { video_smart_resize(4, 10, 2500, 2, 32, 4096, 65536); }),
            "absolute aspect ratio must be smaller than 200, got 250.0");
}

// ---- timestamps: indices padded to pairs, idx / fps, mean of each pair, "%.1f".
TEST(VideoTimestamps, PairsAndFormatting) {
  const auto ts = temporal_group_timestamps({0, 16, 31, 47}, 24.0, 2);
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(timestamp_text(ts[0]), "<0.3 seconds>");
  EXPECT_EQ(ts[1], 1.625);
  EXPECT_EQ(timestamp_text(ts[1]), "<1.6 seconds>");  // 1.625 is exact: ties to even, as Python's format
  const auto odd = temporal_group_timestamps({0, 12, 24}, 24.0, 2);  // padded with 24
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[1], 1.0);
}

// ---- decoding
void expect_same_frames(const std::vector<RgbImage>& a, const std::vector<RgbImage>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].width, b[i].width);
    ASSERT_EQ(a[i].height, b[i].height);
    EXPECT_TRUE(a[i].rgb == b[i].rgb) << "frame " << i;
  }
}

TEST(VideoDecode, FfV1MatroskaIsLossless) {
  const auto frames = test::pattern_frames(10, 64, 48);
  const std::string mkv = test::encode_test_video(frames, {});
  const VideoInfo info = probe_video("video/x-matroska", mkv, "video 1");
  EXPECT_EQ(info.total_frames, 10);
  EXPECT_EQ(info.width, 64);
  EXPECT_EQ(info.height, 48);
  ASSERT_TRUE(info.fps.has_value());
  EXPECT_DOUBLE_EQ(*info.fps, 24.0);
  expect_same_frames(decode_video_frames(mkv, "video 1", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}), frames);
  // Any order, repeats allowed.
  const auto some = decode_video_frames(mkv, "video 1", {9, 0, 0});
  EXPECT_TRUE(some[0].rgb == frames[9].rgb);
  EXPECT_TRUE(some[2].rgb == frames[0].rgb);
}

TEST(VideoDecode, PngInMp4IsLossless) {
  const auto frames = test::pattern_frames(6, 40, 30, 7);
  test::VideoSpec s;
  s.muxer = "mp4";
  s.encoder = "png";
  s.pix_fmt = AV_PIX_FMT_RGB24;
  s.file = "png.mp4";
  const std::string mp4 = test::encode_test_video(frames, s);
  EXPECT_EQ(probe_video("video/mp4", mp4, "v").total_frames, 6);
  expect_same_frames(decode_video_frames(mp4, "v", {0, 1, 2, 3, 4, 5}), frames);
}

double mean_abs_diff(const RgbImage& a, const RgbImage& b) {
  double s = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) s += std::abs(int(a.rgb[i]) - int(b.rgb[i]));
  return s / static_cast<double>(a.rgb.size());
}

// Smooth frames (no noise channel) so that lossy codecs reproduce them closely.
std::vector<RgbImage> smooth_frames(int n, int w, int h) {
  auto f = test::pattern_frames(n, w, h);
  for (auto& img : f)
    for (size_t i = 2; i < img.rgb.size(); i += 3) img.rgb[i] = 128;
  return f;
}

TEST(VideoDecode, H264Mp4AndVp9WebmDecode) {
  const auto frames = smooth_frames(8, 64, 48);
  test::VideoSpec h264;
  h264.muxer = "mp4";
  h264.encoder = "libx264";
  h264.pix_fmt = AV_PIX_FMT_YUV420P;
  h264.file = "h264.mp4";
  test::VideoSpec vp9;
  vp9.muxer = "webm";
  vp9.encoder = "libvpx-vp9";
  vp9.pix_fmt = AV_PIX_FMT_YUV420P;
  vp9.file = "vp9.webm";
  for (const auto& [spec, type] : {std::pair{h264, "video/mp4"}, std::pair{vp9, "video/webm"}}) {
    SCOPED_TRACE(spec.encoder);
    const std::string bytes = test::encode_test_video(frames, spec);
    const VideoInfo info = probe_video(type, bytes, "v");
    EXPECT_EQ(info.total_frames, 8);
    const auto got = decode_video_frames(bytes, "v", {0, 7});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_LT(mean_abs_diff(got[0], frames[0]), 6.0);
    EXPECT_LT(mean_abs_diff(got[1], frames[7]), 6.0);
  }
}

// ---- hostile files
class VideoHostile : public ::testing::Test {
 protected:
  static const std::string& mkv() {
    static const std::string b = test::encode_test_video(test::pattern_frames(10, 64, 48), {.file = "hostile.mkv"});
    return b;
  }
};

TEST_F(VideoHostile, TruncatedFileIsAClearError) {
  // Matroska has no frame index: a file cut inside its clusters either fails on a short block
  // or ends early with the frames before the cut (4 of 10 at half); it never crashes or hangs,
  // and never invents frames.
  for (size_t keep : {size_t{3}, size_t{40}, mkv().size() / 2, mkv().size() - 7}) {
    SCOPED_TRACE(keep);
    ErrorKind kind{};
    VideoInfo info;
    const std::string msg = error_of([&] { info = probe_video("", mkv().substr(0, keep), "video 1"); }, &kind);
    std::printf("[ video ] mkv cut at %zu of %zu: %s\n", keep, mkv().size(),
                msg.empty() ? ("decoded " + std::to_string(info.total_frames) + " frames").c_str() : msg.c_str());
    if (!msg.empty()) {
      EXPECT_EQ(msg.rfind("video 1: ", 0), 0u) << msg;
      EXPECT_EQ(kind, ErrorKind::kInvalidRequest) << msg;
    } else {
      EXPECT_LE(info.total_frames, 10);  // the complete frames before the cut, as any FFmpeg-based loader
    }
  }
  EXPECT_EQ(error_of([&] { probe_video("", mkv().substr(0, 3), "video 1"); }),
            "video 1: data is not an MP4, WebM or Matroska video");
  // MP4 lists every sample in its index: data cut short is an error, wherever the cut falls.
  test::VideoSpec s;
  s.muxer = "mp4";
  s.encoder = "png";
  s.pix_fmt = AV_PIX_FMT_RGB24;
  s.file = "cut.mp4";
  const std::string mp4 = test::encode_test_video(test::pattern_frames(6, 40, 30), s);
  for (size_t keep : {mp4.size() / 3, mp4.size() / 2, mp4.size() - 100}) {
    SCOPED_TRACE(keep);
    ErrorKind kind{};
    const std::string msg = error_of([&] { probe_video("video/mp4", mp4.substr(0, keep), "video 3"); }, &kind);
    std::printf("[ video ] mp4 cut at %zu of %zu: %s\n", keep, mp4.size(), msg.c_str());
    EXPECT_EQ(msg.rfind("video 3: ", 0), 0u) << msg;
    EXPECT_EQ(kind, ErrorKind::kInvalidRequest) << msg;
  }
}

TEST_F(VideoHostile, NotAVideoAndWrongType) {
  EXPECT_EQ(error_of([] { probe_video("", "hello world, not a video", "video 1"); }),
            "video 1: data is not an MP4, WebM or Matroska video");
  EXPECT_EQ(error_of([&] { probe_video("video/mp4", mkv(), "video 1"); }),
            "video 1: declared content type video/mp4 but the data is a WebM/Matroska file");
  EXPECT_NE(error_of([] { probe_video("video/avi", "xxxx", "video 1"); }).find("unsupported content type"),
            std::string::npos);
  std::string fake_mp4 = std::string("\0\0\0\x18" "ftypisom", 12) + std::string(200, '\x7f');
  EXPECT_EQ(error_of([&] { probe_video("", fake_mp4, "video 2"); }).rfind("video 2: ", 0), 0u);
}

TEST_F(VideoHostile, LimitsRefuseBeforeDecoding) {
  ErrorKind kind{};
  VideoDecodeLimits small;
  small.max_frame_pixels = 1000;  // 64x48 = 3072
  EXPECT_EQ(error_of([&] { probe_video("", mkv(), "video 1", small); }, &kind),
            "video 1: 64x48 frames are more than 1000 pixels");
  EXPECT_EQ(kind, ErrorKind::kRequestTooLarge);
  VideoDecodeLimits few;
  few.max_frames = 5;  // an endless stream stops here
  EXPECT_EQ(error_of([&] { probe_video("", mkv(), "video 1", few); }, &kind), "video 1: the video has more than 5 frames");
  EXPECT_EQ(kind, ErrorKind::kRequestTooLarge);
  VideoDecodeLimits work;
  work.max_total_pixels = 5 * 64 * 48;  // 10 frames of 64x48: the MKV header gives no count, so the 6th frame stops it
  EXPECT_EQ(error_of([&] { probe_video("", mkv(), "video 1", work); }, &kind),
            "video 1: the video has more than 15360 pixels in all its frames (frames x width x height)");
  EXPECT_EQ(kind, ErrorKind::kRequestTooLarge);
  VideoDecodeLimits brief;
  brief.max_duration_seconds = 0.2;  // 10 frames at 24 fps = 0.42 s
  EXPECT_EQ(error_of([&] { probe_video("", mkv(), "video 1", brief); }, &kind),
            "video 1: the video lasts more than 0.2 seconds");
  EXPECT_EQ(kind, ErrorKind::kRequestTooLarge);
}

TEST_F(VideoHostile, DeclaredSizeIsCheckedBeforeAnyFrameIsDecoded) {
  // A wide, flat clip (8000x8) against a 10,000-pixel budget: refused from the stream header.
  // (The same check runs again on every decoded frame, and AVCodecContext::max_pixels makes the
  // decoder refuse to allocate a larger frame whatever the header said.)
  const std::string wide = test::encode_test_video(test::pattern_frames(2, 8000, 8), {.file = "wide.mkv"});
  VideoDecodeLimits budget;
  budget.max_frame_pixels = 10000;
  ErrorKind kind{};
  EXPECT_EQ(error_of([&] { probe_video("", wide, "video 1", budget); }, &kind),
            "video 1: 8000x8 frames are more than 10000 pixels");
  EXPECT_EQ(kind, ErrorKind::kRequestTooLarge);
}

TEST_F(VideoHostile, UnsupportedCodecIsNamed) {
  test::VideoSpec s;
  s.encoder = "mpeg4";
  s.pix_fmt = AV_PIX_FMT_YUV420P;
  s.file = "mpeg4.mkv";
  const std::string b = test::encode_test_video(smooth_frames(3, 32, 32), s);
  ErrorKind kind{};
  EXPECT_EQ(error_of([&] { probe_video("video/x-matroska", b, "video 1"); }, &kind),
            "video 1: video codec 'mpeg4' is not supported (H.264, HEVC, VP8, VP9, AV1, FFV1, PNG are)");
  EXPECT_EQ(kind, ErrorKind::kUnsupported);
}

// ---- a video as a file and as a list of images: same pixels, same processor output
VideoInput frame_list(const std::vector<RgbImage>& frames) {
  VideoInput v;
  for (const auto& f : frames) v.frames.push_back({"image/png", test::encode_png(f)});
  return v;
}

TEST(VideoMedia, FrameListAndContainerGiveTheSamePatches) {
  const auto frames = test::pattern_frames(16, 64, 48, 3);
  VideoInput file;
  file.content_type = "video/x-matroska";
  file.data = test::encode_test_video(frames, {.file = "same.mkv"});
  const VideoInput list = frame_list(frames);
  VideoProcessorConfig c = qwen3vl_defaults();
  c.frame.min_pixels = 4096;
  c.frame.max_pixels = 65536;
  const PreparedVideo a = prepare_video(file, c, "video 1");
  const PreparedVideo b = prepare_video(list, c, "video 1");
  EXPECT_EQ(a.indices, (std::vector<int64_t>{0, 5, 10, 15}));  // n = 4: linspace(0, 15, 4)
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.patches.grid_thw, b.patches.grid_thw);
  EXPECT_EQ(a.patches.grid_thw[0], 2);
  EXPECT_TRUE(a.patches.pixel_values == b.patches.pixel_values);
  EXPECT_EQ(a.timestamps, b.timestamps);
  // Sampled frame i of the list path is the resized source frame indices[i]: frame 5 of 16.
  std::vector<int64_t> idx;
  double fps = 0;
  const auto sampled = sampled_video_frames(list, c, "video 1", {}, &idx, &fps);
  const ResizedSize target = video_resize_target(4, 48, 64, c);
  EXPECT_TRUE(sampled[1].rgb == resize_antialias_u8(frames[5], target.height, target.width, ResampleFilter::kBicubic).rgb);
  EXPECT_EQ(fps, 24.0);
}

TEST(VideoMedia, FrameListErrorsNameTheFrame) {
  auto frames = test::pattern_frames(4, 32, 32);
  VideoInput list = frame_list(frames);
  frames[2] = test::pattern_frames(1, 33, 32)[0];
  VideoInput mixed = frame_list(frames);
  const VideoProcessorConfig c = qwen3vl_defaults();
  EXPECT_EQ(error_of([&] { prepare_video(mixed, c, "video 2"); }),
            "video 2 frame 2 is 33x32 but frame 0 is 32x32 (the frames of a video must have one size)");
  VideoInput one = frame_list(test::pattern_frames(1, 32, 32));
  EXPECT_EQ(error_of([&] { prepare_video(one, c, "video 1"); }), "video 1: t:1 must be larger than temporal_factor:2");
}

}  // namespace
}  // namespace stave

namespace stave {
namespace {

// The release's processor_config.json carries a "video_processor" object; a folder without one
// gets Qwen3VLVideoProcessor's defaults over the image processor's fields.
TEST(VideoProcessorConfig, FromTheReleaseAndDefaults) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/processor_config.json");
  const std::string p = test::fixture("public/model-bf16/processor_config.json");
  const VideoProcessorConfig v = parse_video_processor_config(read_file(p), p);
  EXPECT_TRUE(v.present);
  EXPECT_EQ(v.fps, 2.0);
  EXPECT_EQ(v.min_frames, 4);
  EXPECT_EQ(v.max_frames, 768);
  EXPECT_EQ(v.frame.min_pixels, 131072);
  EXPECT_EQ(v.frame.max_pixels, 786432);
  EXPECT_EQ(v.frame.temporal_patch_size, 2);
  EXPECT_FALSE(v.cap_pixels_per_frame);
  const VideoProcessorConfig none = parse_video_processor_config(R"({"image_processor": {"patch_size": 16}})", "x");
  EXPECT_FALSE(none.present);
  ImageProcessorConfig image;
  image.present = true;
  image.min_pixels = 4096;
  const VideoProcessorConfig d = default_video_processor_config(image);
  EXPECT_TRUE(d.present);
  EXPECT_EQ(d.frame.min_pixels, 128 * 32 * 32);
  EXPECT_EQ(d.frame.max_pixels, 32 * 32 * 768);
  EXPECT_THROW(parse_video_processor_config(R"({"fps": -1})", "x"), Error);
  EXPECT_THROW(parse_video_processor_config(R"({"min_frames": 9, "max_frames": 4})", "x"), Error);
}

}  // namespace
}  // namespace stave
