// libFuzzer target: video bytes -> prepare_video (FFmpeg demux + decode of MP4/MOV and
// WebM/Matroska, the processor's sampling, resize, patchify). Any input must give patches or a
// stave::Error; a crash, sanitizer report, leak, hang or other exception is a finding. The first
// byte picks the declared content type (mostly "sniff"); the limits are lowered to keep runs
// fast. Seeds: fuzz/corpus/fuzz_video (fuzz/tools/make_video_seeds.sh).
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/model_config.h"
#include "stave/errors.h"
#include "vision/video_media.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* const kTypes[] = {"", "", "", "", "video/mp4", "video/webm", "video/x-matroska", "video/avi"};
  stave::VideoInput video;
  video.content_type = kTypes[data[0] & 7];
  video.data.assign(reinterpret_cast<const char*>(data + 1), size - 1);

  stave::VideoProcessorConfig config = stave::default_video_processor_config(stave::ImageProcessorConfig{});
  config.present = true;
  config.frame.min_pixels = 4096;
  config.frame.max_pixels = 65536;
  config.max_frames = 16;
  stave::VideoPrepareOptions options;
  options.decode.max_frame_pixels = 1 << 18;
  options.decode.max_frames = 300;
  options.decode.max_duration_seconds = 120;
  options.decode.max_packets = 2000;
  try {
    const stave::PreparedVideo v = stave::prepare_video(video, config, "video 1", options);
    const auto& p = v.patches;
    if (p.pixel_values.size() != static_cast<size_t>(p.rows * p.row_size)) __builtin_trap();
    if (static_cast<int64_t>(v.timestamps.size()) != p.grid_thw[0]) __builtin_trap();
  } catch (const stave::Error&) {
  }
  return 0;
}
