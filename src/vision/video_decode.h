// Video bytes (MP4/MOV, WebM, MKV) to sampled RGB frames through FFmpeg (libavformat demuxes
// from memory, libavcodec decodes, libswscale converts to RGB24). Two passes over the bytes:
// the first decodes every frame to count them (the count the processor's sampling needs), the
// second converts only the sampled ones. docs/vision.md §6.
//
// Hostile input: only the mov/mp4 and matroska/webm demuxers and a fixed list of video codecs
// are allowed; the container may not open other files (no external references); the frame
// size is checked against `max_frame_pixels` from the stream header and by the decoder itself
// (AVCodecContext::max_pixels) before it allocates a frame; the number of frames, the duration
// and the number of packets are bounded. Every failure is a stave::Error naming the video.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vision/image_decode.h"

namespace stave {

struct VideoDecodeLimits {
  int64_t max_frame_pixels = kDefaultMaxImagePixels;  // width * height of one frame
  int64_t max_frames = 20'000;                         // frames in the stream (decoded)
  double max_duration_seconds = 1800;                  // from the container or the frame times
  int64_t max_packets = 200'000;                       // packets read, all streams
  // Frames x frame pixels over the whole stream: bounds the decoding work (each pass decodes
  // every frame), about 5 minutes of 1080p at 30 fps. A stream header that already promises
  // more is refused before decoding.
  int64_t max_total_pixels = 20'000'000'000;
};

struct VideoInfo {
  std::string container;            // "mov,mp4,m4a,3gp,3g2,mj2" / "matroska,webm" (FFmpeg's names)
  std::string codec;                // decoder name, e.g. "h264", "vp9", "libdav1d", "ffv1"
  int64_t width = 0, height = 0;    // of the decoded frames
  int64_t total_frames = 0;         // frames the decoder gave
  std::optional<double> fps;        // the stream's average frame rate, when it has one
  double duration_seconds = 0;
};

// The container a content type names: "video/mp4" (also "video/quicktime"), "video/webm",
// "video/x-matroska" (also "video/matroska"); case-insensitive, parameters after ';' ignored,
// "" = any of them. Throws kInvalidRequest naming the type for anything else.
void check_video_content_type(std::string_view content_type, const std::string& label);

// Pass 1: opens, checks and decodes the whole stream, counting frames.
VideoInfo probe_video(std::string_view content_type, std::string_view bytes, const std::string& label,
                      const VideoDecodeLimits& limits = {});

// Pass 2: the frames at `indices` (ascending or not, repeats allowed; each < info.total_frames),
// in the order given, as RGB24, each passed through `each` (e.g. a resize) as soon as it is
// decoded, so that only one full-size frame is held at a time.
std::vector<RgbImage> decode_video_frames(std::string_view bytes, const std::string& label,
                                          const std::vector<int64_t>& indices, const VideoDecodeLimits& limits = {},
                                          const std::function<RgbImage(RgbImage)>& each = {});

}  // namespace stave
