// Test videos: video_encode.h's encoders writing into this test process's scratch folder.
#pragma once
#include <string>
#include <vector>

#include "test_temp.h"
#include "util/mapped_file.h"
#include "video_encode.h"

namespace stave::test {

inline std::string encode_test_video(const std::vector<RgbImage>& frames, const VideoSpec& spec) {
  const std::string path = temp_dir() + spec.file;
  encode_video_file(frames, spec, path);
  return read_file(path);
}

}  // namespace stave::test
