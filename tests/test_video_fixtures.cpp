// Video inputs against transformers' own outputs (tests/data/video, made on the GPU machine by
// tools/reference/make_video_reference.py: Qwen3VLVideoProcessor + Qwen3VLProcessor + the
// model, transformers 5.17, torch 2.11). Each check SKIPS while that folder has no reference
// outputs: the data has not been produced yet (no GPU machine in the session that wrote this);
// docs/vision.md §6 says so. Nothing here compares stave with itself.
//   - pixel_values_videos, video_grid_thw and the media ids of every clip (frames as PNGs), and
//     the processor's error text where it refused one;
//   - the same through a lossless container (FFV1 in Matroska at 24 fps, made here): same pixels;
//   - whole decisions (--precision exact) on the alt model, BF16 and MXFP4, logits within 1e-4,
//     with the videos as frame lists and again as containers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "decide/image_input.h"
#include "io/safetensors.h"
#include "stave/engine.h"
#include "stave/errors.h"
#include "test_util.h"
#include "test_vision_util.h"
#include "text/tokenizer.h"
#include "video_test_util.h"
#include "vision/image_decode.h"
#include "decide/media_tokens.h"
#include "vision/video_media.h"

namespace stave {
namespace {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kDir = std::string(STAVE_SOURCE_DIR) + "/tests/data/video";

#define STAVE_REQUIRE_VIDEO_REFERENCE()                                                                  \
  do {                                                                                                   \
    if (!fs::exists(kDir + "/pixel_values_videos.safetensors") || !fs::exists(kDir + "/cases"))          \
      GTEST_SKIP() << "no video reference data yet (tests/data/video has only its input config): run "  \
                      "tools/reference/run_video_on_device.sh on the GPU machine (docs/vision.md §6)";   \
  } while (0)

VideoProcessorConfig video_config() {
  const std::string p = kDir + "/video_preprocessor_config.json";
  return parse_video_processor_config(read_file(p), p);
}

std::vector<std::string> sorted_entries(const std::string& dir, bool dirs) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() == dirs) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

VideoInput clip_frames(const std::string& clip) {
  VideoInput v;
  const std::string d = kDir + "/frames/" + clip;
  for (const auto& f : sorted_entries(d, false)) v.frames.push_back({"image/png", read_file(d + "/" + f)});
  return v;
}

VideoInput clip_container(const std::string& clip) {
  std::vector<RgbImage> frames;
  for (const auto& f : clip_frames(clip).frames) frames.push_back(decode_image(f.content_type, f.data, clip));
  VideoInput v;
  v.content_type = "video/x-matroska";
  v.data = test::encode_test_video(frames, {.fps = 24, .file = clip + ".mkv"});
  return v;
}

std::string text_of(const TensorRef& t) { return std::string(reinterpret_cast<const char*>(t.data), t.nbytes); }

void check_clip(const SafetensorsFile& ref, const std::string& clip, const VideoInput& video, const Tokenizer* tok,
                const MediaTokenIds* ids) {
  const VideoProcessorConfig c = video_config();
  if (const TensorRef* err = ref.find(clip + "/error")) {
    const std::string want = text_of(*err);
    try {
      prepare_video(video, c, "video 1");
      ADD_FAILURE() << "expected the processor's error: " << want;
    } catch (const Error& e) {
      const std::string got = e.what();
      EXPECT_TRUE(got.size() >= want.size() && got.compare(got.size() - want.size(), want.size(), want) == 0)
          << got << " does not end with " << want;
    }
    return;
  }
  const TensorRef* pv = ref.find(clip);
  const TensorRef* grid = ref.find(clip + "/grid");
  ASSERT_TRUE(pv && grid) << "missing reference entries";
  const PreparedVideo p = prepare_video(video, c, "video 1");
  const auto* g = reinterpret_cast<const int64_t*>(grid->data);
  EXPECT_EQ(p.patches.grid_thw, (std::array<int64_t, 3>{g[0], g[1], g[2]}));
  ASSERT_EQ(p.patches.pixel_values.size() * sizeof(float), pv->nbytes);
  size_t differ = 0;
  for (size_t i = 0; i < p.patches.pixel_values.size(); ++i) {
    float want;
    std::memcpy(&want, pv->data + i * sizeof(float), sizeof want);
    differ += p.patches.pixel_values[i] != want;
  }
  EXPECT_EQ(differ, 0u) << "of " << p.patches.pixel_values.size() << " values";
  if (tok && ids) {
    const TensorRef* want_ids = ref.find(clip + "/ids");
    ASSERT_TRUE(want_ids);
    EncodedMedia media;
    const auto got = media_segment_ids({}, {VideoSegment{p.patches.grid_thw, p.timestamps}}, *ids, 2, &media);
    std::vector<int32_t> want(want_ids->nbytes / sizeof(int64_t));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(want_ids->data)[i]);
    EXPECT_EQ(got, want);
  }
}

TEST(VideoReference, PixelValuesAndMediaIdsOfEveryClip) {
  STAVE_REQUIRE_VIDEO_REFERENCE();
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const auto tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  const ModelConfig cfg =
      parse_model_config(read_file(test::fixture("public/model-bf16/config.json")), "config.json");
  const MediaTokenIds ids = media_token_ids(*tok, cfg);
  SafetensorsFile ref(kDir + "/pixel_values_videos.safetensors");
  const auto clips = sorted_entries(kDir + "/frames", true);
  ASSERT_FALSE(clips.empty());
  for (const auto& clip : clips) {
    SCOPED_TRACE(clip);
    check_clip(ref, clip, clip_frames(clip), tok.get(), &ids);
  }
}

TEST(VideoReference, LosslessContainerGivesTheReferencePixels) {
  STAVE_REQUIRE_VIDEO_REFERENCE();
  SafetensorsFile ref(kDir + "/pixel_values_videos.safetensors");
  for (const auto& clip : sorted_entries(kDir + "/frames", true)) {
    SCOPED_TRACE(clip);
    check_clip(ref, clip, clip_container(clip), nullptr, nullptr);
  }
}

// request.json with every frame-list video replaced by the same frames in an FFV1 Matroska file.
std::string as_containers(const std::string& request_json) {
  ojson r = ojson::parse(request_json);
  for (auto& v : r["videos"]) {
    std::vector<RgbImage> frames;
    for (const auto& f : v) {
      const std::string url = f.get<std::string>();
      frames.push_back(decode_image("", test::base64_decode(url.substr(url.find(',') + 1)), "frame"));
    }
    v = "data:video/x-matroska;base64," + encode_base64(test::encode_test_video(frames, {.file = "case.mkv"}));
  }
  return r.dump();
}

void run_cases(const std::string& format) {
  STAVE_REQUIRE_VIDEO_REFERENCE();
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const std::string dir = test::synth_alt_release(format, "video");
  fs::copy_file(kDir + "/video_preprocessor_config.json", dir + "/video_preprocessor_config.json",
                fs::copy_options::overwrite_existing);
  EngineOptions eo;
  eo.model = dir;
  eo.precision = Precision::kExact;
  auto engine = Engine::load(eo);
  const auto names = sorted_entries(kDir + "/cases", true);
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) {
    const std::string cdir = kDir + "/cases/" + name;
    const ojson expected = ojson::parse(read_file(cdir + "/expected-" + format + ".json"));
    const std::string request = read_file(cdir + "/request.json");
    for (const bool container : {false, true}) {
      SCOPED_TRACE(name + (container ? " (container)" : " (frames)"));
      DecideOptions o;
      o.max_length = expected["max_length"].get<int64_t>();
      o.include_logits = true;
      const Decision d = engine->decide(container ? as_containers(request) : request, o);
      ojson got = ojson::parse(d.json);
      const ojson logits = got["logits"];
      got.erase("logits");
      EXPECT_TRUE(test::same_within_one_unit(got, expected["response"])) << got.dump();
      EXPECT_EQ(d.usage.input_tokens, static_cast<int64_t>(expected["input_ids"].size()));
      double worst = 0;
      const auto& qs = expected["questions"];
      for (size_t q = 0; q < qs.size(); ++q) {
        const auto& want = expected["logits"][q];
        const auto& have = logits[qs[q]["id"].get<std::string>()];
        ASSERT_EQ(have.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          worst = std::max(worst, std::fabs(have[i].get<double>() - want[i].get<double>()));
      }
      std::printf("[ video ] %s %-28s %s max |Δlogit| %.3g\n", format.c_str(), name.c_str(),
                  container ? "container" : "frames   ", worst);
      EXPECT_LE(worst, 1e-4);
    }
  }
  fs::remove_all(dir);
}

TEST(VideoReference, AltBf16ExactDecisions) { run_cases("bf16"); }
TEST(VideoReference, AltMxfp4ExactDecisions) { run_cases("mxfp4"); }

}  // namespace
}  // namespace stave
