// Writes the seed corpus of fuzz_video: tiny videos of each container and codec the decoder
// accepts, made with FFmpeg's encoders (tests/video_encode.h). Run by make_video_seeds.sh.
// `--example FILE` writes the README's example clip instead (2 s of H.264 in MP4, 64x48, 24 fps).
#include <cstdio>
#include <fstream>
#include <string>

#include "video_encode.h"

int main(int argc, char** argv) {
  using stave::test::VideoSpec;
  if (argc == 3 && std::string(argv[1]) == "--example") {
    stave::test::encode_video_file(stave::test::pattern_frames(48, 64, 48),
                                   {"mp4", "libx264", AV_PIX_FMT_YUV420P, 24, ""}, argv[2]);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_video_seeds OUT_DIR | --example FILE\n");
    return 2;
  }
  const std::string out = argv[1];
  struct Seed {
    const char* name;
    VideoSpec spec;
    int frames, w, h;
  };
  const Seed seeds[] = {
      {"ffv1.mkv", {"matroska", "ffv1", AV_PIX_FMT_0RGB32, 24, ""}, 5, 32, 24},
      {"png.mp4", {"mp4", "png", AV_PIX_FMT_RGB24, 10, ""}, 4, 16, 16},
      {"h264.mp4", {"mp4", "libx264", AV_PIX_FMT_YUV420P, 24, ""}, 6, 32, 32},
      {"vp9.webm", {"webm", "libvpx-vp9", AV_PIX_FMT_YUV420P, 24, ""}, 4, 32, 32},
      {"vp8.webm", {"webm", "libvpx", AV_PIX_FMT_YUV420P, 12, ""}, 3, 32, 16},
  };
  for (const Seed& s : seeds) {
    const std::string tmp = out + "/" + s.name + ".tmp";
    stave::test::encode_video_file(stave::test::pattern_frames(s.frames, s.w, s.h), s.spec, tmp);
    // The target reads a content-type byte first: 0 = sniff.
    std::ifstream in(tmp, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(out + "/" + s.name, std::ios::binary) << '\0' << bytes;
    std::remove(tmp.c_str());
    std::printf("%s: %zu bytes\n", s.name, bytes.size() + 1);
  }
  return 0;
}
