// video_decode.h for a build configured with -DSTAVE_VIDEO=OFF (no FFmpeg): every video input
// is refused with an error that names the input and says why, before any byte is decoded.
#include "stave/errors.h"
#include "vision/video_decode.h"

namespace stave {
namespace {

[[noreturn]] void refuse(const std::string& label) {
  throw Error(ErrorKind::kUnsupported,
              label + ": this build of stave has no video support (configured with -DSTAVE_VIDEO=OFF, "
                      "without FFmpeg); send the video as a list of frame images, or use a build with video");
}

}  // namespace

void check_video_content_type(std::string_view, const std::string& label) { refuse(label); }

VideoInfo probe_video(std::string_view, std::string_view, const std::string& label, const VideoDecodeLimits&) {
  refuse(label);
}

std::vector<RgbImage> decode_video_frames(std::string_view, const std::string& label, const std::vector<int64_t>&,
                                          const VideoDecodeLimits&, const std::function<RgbImage(RgbImage)>&) {
  refuse(label);
}

}  // namespace stave
