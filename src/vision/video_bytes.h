// A video as the vision layer takes it: a container file's bytes, or a list of encoded images
// taken as its frames (the processor accepts both). src/decide's request holds these.
#pragma once
#include <string>
#include <vector>

namespace stave {

struct VideoFrameBytes {
  std::string content_type;  // "image/png", "image/jpeg", "image/webp"
  std::string data;          // the encoded image
};

struct VideoInput {
  std::string content_type;            // "video/mp4", "video/webm", "video/x-matroska"; "" for frames
  std::string data;                    // the file's bytes (empty for frames)
  std::vector<VideoFrameBytes> frames;  // a video given as images, in order (empty for a file)
};

}  // namespace stave
