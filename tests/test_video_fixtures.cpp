// Video inputs against transformers' own outputs (tests/data/video, made on the GPU machine by
// tools/reference/make_video_reference.py: Qwen3VLVideoProcessor + Qwen3VLProcessor + the
// model, transformers 5.17, torch 2.11; made 2026-12-05). Each check skips if that folder lacks
// the reference outputs. Nothing here compares stave with itself.
//   - pixel_values_videos, video_grid_thw and the media ids of every clip (frames as PNGs), and
//     the processor's error text where it refused one;
//   - the same through a lossless container (FFV1 in Matroska at 24 fps, made here): same pixels;
//   - whole decisions (--precision exact) on the alt model, BF16 and MXFP4, logits within 1e-4,
//     with the videos as frame lists and again as containers (containers only in builds with
//     FFmpeg, -DSTAVE_VIDEO=ON); the frame-list cases also on each device backend
//     (Devices/VideoReferenceOn: the GPU suite runs its cuda instances).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "decide/image_input.h"
#include "io/safetensors.h"
#include "stave/engine.h"
#include "stave/errors.h"
#include "test_util.h"
#include "test_vision_util.h"
#include "text/tokenizer.h"
#if STAVE_HAS_VIDEO
#include "video_test_util.h"
#endif
#include "backends/registry.h"
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

#if STAVE_HAS_VIDEO
VideoInput clip_container(const std::string& clip) {
  std::vector<RgbImage> frames;
  for (const auto& f : clip_frames(clip).frames) frames.push_back(decode_image(f.content_type, f.data, clip));
  VideoInput v;
  v.content_type = "video/x-matroska";
  v.data = test::encode_test_video(frames, {.fps = 24, .file = clip + ".mkv"});
  return v;
}
#endif

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

#if STAVE_HAS_VIDEO
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
#endif

// Where the decisions run and how close they must be: exact, logits within 1e-4 of the
// reference's; fast, every probability within `prob_tol` and the same top choice.
struct VideoRun {
  std::string device = "cpu";
  Precision precision = Precision::kExact;
  bool containers = STAVE_HAS_VIDEO;
  double prob_tol = 0;
};

// The largest |Δp| over every answer's probabilities (and the same top choice), fast precision.
double worst_probability_diff(const ojson& got, const ojson& want) {
  double worst = 0;
  for (const auto& [qid, a] : want["answers"].items()) {
    const ojson& g = got["answers"][qid];
    if (a.contains("noul")) worst = std::max(worst, std::fabs(g["noul"].get<double>() - a["noul"].get<double>()));
    if (!a.contains("probabilities")) continue;
    for (const auto& [opt, p] : a["probabilities"].items())
      worst = std::max(worst, std::fabs(g["probabilities"][opt].get<double>() - p.get<double>()));
    if (a.contains("choice")) {
      EXPECT_EQ(g["choice"], a["choice"]) << qid;
    }
  }
  return worst;
}

void run_cases(const std::string& format, const VideoRun& run = {}) {
  STAVE_REQUIRE_VIDEO_REFERENCE();
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  if (const std::string why = backend_unavailable_reason(run.device); !why.empty()) GTEST_SKIP() << why;
  const std::string dir = test::synth_alt_release(format, "video");
  fs::copy_file(kDir + "/video_preprocessor_config.json", dir + "/video_preprocessor_config.json",
                fs::copy_options::overwrite_existing);
  EngineOptions eo;
  eo.model = dir;
  eo.precision = run.precision;
  eo.device = run.device;
  auto engine = Engine::load(eo);
  const auto names = sorted_entries(kDir + "/cases", true);
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) {
    const std::string cdir = kDir + "/cases/" + name;
    const ojson expected = ojson::parse(read_file(cdir + "/expected-" + format + ".json"));
    const std::string request = read_file(cdir + "/request.json");
    for (const bool container : {false, true}) {
      if (container && !run.containers) continue;
      SCOPED_TRACE(name + (container ? " (container)" : " (frames)"));
      DecideOptions o;
      o.max_length = expected["max_length"].get<int64_t>();
      o.include_logits = true;
#if STAVE_HAS_VIDEO
      const Decision d = engine->decide(container ? as_containers(request) : request, o);
#else
      const Decision d = engine->decide(request, o);
#endif
      ojson got = ojson::parse(d.json);
      const ojson logits = got["logits"];
      got.erase("logits");
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
      if (run.precision == Precision::kExact) {
        EXPECT_TRUE(test::same_within_one_unit(got, expected["response"])) << got.dump();
        std::printf("[ video ] %s %s %-28s %s max |Δlogit| %.3g\n", format.c_str(), run.device.c_str(),
                    name.c_str(), container ? "container" : "frames   ", worst);
        EXPECT_LE(worst, 1e-4);
      } else {
        const double dp = worst_probability_diff(got, expected["response"]);
        std::printf("[ video ] %s %s fast %-28s %s max |Δp| %.3g (max |Δlogit| %.3g)\n", format.c_str(),
                    run.device.c_str(), name.c_str(), container ? "container" : "frames   ", dp, worst);
        EXPECT_LE(dp, run.prob_tol);
      }
    }
  }
  fs::remove_all(dir);
}

TEST(VideoReference, AltBf16ExactDecisions) { run_cases("bf16"); }
TEST(VideoReference, AltMxfp4ExactDecisions) { run_cases("mxfp4"); }

// The frame-list cases in fast precision on the CPU, and on a device backend (the GPU suite runs
// the cuda instances; they skip where the backend is not built or has no device). Fast precision's bound
// is the fixture decisions' (README: |Δp| ≤ 0.005 on BF16; MXFP4's fast-precision rule allows
// an activation-code flip, so 0.02 there, with the same top choice).
struct VideoDeviceCase {
  std::string format, device;
  Precision precision;
  double prob_tol;
};

void PrintTo(const VideoDeviceCase& c, std::ostream* os) {
  *os << c.format << " " << c.device << " " << to_string(c.precision);
}

class VideoReferenceOn : public ::testing::TestWithParam<VideoDeviceCase> {};

TEST_P(VideoReferenceOn, AltFrameListDecisions) {
  const VideoDeviceCase& c = GetParam();
  run_cases(c.format, VideoRun{c.device, c.precision, false, c.prob_tol});
}

INSTANTIATE_TEST_SUITE_P(Devices, VideoReferenceOn,
                         ::testing::Values(VideoDeviceCase{"bf16", "cpu", Precision::kFast, 0.005},
                                           VideoDeviceCase{"mxfp4", "cpu", Precision::kFast, 0.02},
                                           VideoDeviceCase{"bf16", "cuda", Precision::kExact, 0},
                                           VideoDeviceCase{"mxfp4", "cuda", Precision::kExact, 0},
                                           VideoDeviceCase{"bf16", "cuda", Precision::kFast, 0.005},
                                           VideoDeviceCase{"mxfp4", "cuda", Precision::kFast, 0.02}),
                         [](const ::testing::TestParamInfo<VideoDeviceCase>& i) {
                           return i.param.format + "_" + i.param.device + "_" + to_string(i.param.precision);
                         });

}  // namespace
}  // namespace stave
