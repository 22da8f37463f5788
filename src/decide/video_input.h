// One item of a request's `videos` array: a data URL string (data:video/mp4;base64,...), an
// object {"content_type", "base64"}, or an array of images (each an `images` item) taken as
// the video's frames. Base64 is decoded here; the container is decoded later by src/vision.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "decide/request.h"

namespace stave {

struct VideoItemLimits {
  std::optional<size_t> max_bytes;   // decoded, the file or all frames of a list
  std::optional<size_t> max_frames;  // items of a frame list
  bool reject_unknown_fields = false;
};

struct VideoItemResult {
  std::optional<VideoInput> video;  // set when the item is valid
  std::string error;                // otherwise: what is wrong (without the "videos[i]: " prefix)
  std::string error_type;           // RequestIssue::type
};

VideoItemResult parse_video_item(const JsonValue& item, const VideoItemLimits& limits);

// "video/mp4", "video/webm", "video/x-matroska" for those types (case-insensitive;
// "video/quicktime" -> "video/mp4", "video/matroska" -> "video/x-matroska"); "" otherwise.
std::string canonical_video_type(std::string_view type);

}  // namespace stave
