// Videos through the whole engine and the server. The numbers are not checked here (that needs
// the reference: test_video_fixtures.cpp); what is checked is the wiring: a video given as a
// lossless file and as its frames gives byte-identical decisions, the token counts agree with
// the encoder, mixed image + video requests run, and the server refuses paths, URLs and
// decoding limits naming `videos`.
#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decide/image_input.h"
#include "server/api_error.h"
#include "stave/engine.h"
#include "stave/errors.h"
#include "test_serve_util.h"
#include "test_vision_util.h"
#include "video_test_util.h"

namespace stave {
namespace {
using ojson = nlohmann::ordered_json;

std::shared_ptr<const Engine> engine() {
  static std::shared_ptr<const Engine> e = [] {
    EngineOptions eo;
    eo.model = test::fixture("public/model-bf16");
    eo.precision = Precision::kFast;
    return std::shared_ptr<const Engine>(Engine::load(eo));
  }();
  return e;
}

std::string request_with(const std::string& videos_json, const std::string& images_json = "") {
  return R"({"model":"clef","state":"a clip","questions":{"ok":{"type":"noul","instructions":"Fine?"},)"
         R"("kind":{"type":"choice","instructions":"What?","criteria":{"a":"A","b":"B"}}})" +
         (images_json.empty() ? "" : ",\"images\":" + images_json) + ",\"videos\":" + videos_json + "}";
}

TEST(VideoEngine, FileAndFramesGiveTheSameDecision) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const auto frames = test::pattern_frames(12, 40, 30, 5);
  const std::string mkv = test::encode_test_video(frames, {.file = "engine.mkv"});
  std::string list = "[";
  for (size_t i = 0; i < frames.size(); ++i)
    list += (i ? ",\"" : "\"") + std::string("data:image/png;base64,") + encode_base64(test::encode_png(frames[i])) + "\"";
  list += "]";
  DecideOptions o;
  o.include_logits = true;
  const Decision a = engine()->decide(request_with("[\"data:video/x-matroska;base64," + encode_base64(mkv) + "\"]"), o);
  const Decision b = engine()->decide(request_with("[" + list + "]"), o);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.usage.input_tokens, b.usage.input_tokens);
  // 12 frames at 24 fps -> 4 sampled -> 2 temporal groups. 30x40: the height is under 32, so
  // both sides scale by 32/30 first (32x42); 4*32*32 < 131072, so beta = sqrt(131072 / (4*32*42))
  // = 4.938 -> 160x224 -> 10x14 patches, 5x7 = 35 merged tokens a group.
  EXPECT_EQ(a.usage.image_tokens, 2 * 35);
}

TEST(VideoEngine, ImagesAndVideosTogether) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const auto images = test::case_images("017-image-one");
  const std::string image = "[\"data:" + images[0].first + ";base64," + encode_base64(images[0].second) + "\"]";
  const std::string video =
      "[\"data:video/x-matroska;base64," +
      encode_base64(test::encode_test_video(test::pattern_frames(8, 32, 32), {.file = "mixed.mkv"})) + "\"]";
  const Decision only_image = engine()->decide(request_with("[]", image));
  const Decision both = engine()->decide(request_with(video, image));
  EXPECT_GT(both.usage.image_tokens, only_image.usage.image_tokens);
  EXPECT_GT(both.usage.input_tokens, only_image.usage.input_tokens);
}

TEST(VideoEngine, DecodingErrorsNameTheVideo) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const std::string bad = "[{\"content_type\":\"video/mp4\",\"base64\":\"" + encode_base64("not a video at all") + "\"}]";
  try {
    engine()->decide(request_with(bad));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "video 1: data is not an MP4, WebM or Matroska video");
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
  }
}

TEST(VideoServe, ErrorsMapTo413And422NamingVideos) {
  const auto too_large = server::from_engine_error(Error(ErrorKind::kRequestTooLarge, "video 1: the video has more than 20000 frames"));
  EXPECT_EQ(too_large.status, 413);
  EXPECT_EQ(too_large.issues[0].loc, (std::vector<std::string>{"body", "videos"}));
  const auto corrupt = server::from_engine_error(Error(ErrorKind::kInvalidRequest, "video 2: corrupt video data: x"));
  EXPECT_EQ(corrupt.status, 422);
  EXPECT_EQ(corrupt.issues[0].loc, (std::vector<std::string>{"body", "videos"}));
}

TEST(VideoServe, PathsAndUrlsAreRefused) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  test::RunningServer srv(server::ServeOptions{}, "public/model-bf16", engine());
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(300);
  for (const char* item : {R"("clip.mp4")", R"("https://example.com/clip.mp4")", R"(["frame0.png"])"}) {
    SCOPED_TRACE(item);
    auto res = c.Post("/v1/systemone", request_with(std::string("[") + item + "]"), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 422) << res->body;
    const auto detail = nlohmann::json::parse(res->body)["detail"];
    EXPECT_EQ(detail[0]["loc"], nlohmann::json({"body", "videos", "0"})) << res->body;
    EXPECT_EQ(detail[0]["msg"].get<std::string>().rfind("videos[0]: ", 0), 0u) << res->body;
  }
  // More videos than the server takes.
  const std::string one = "\"data:video/mp4;base64," + encode_base64("\x1A\x45\xDF\xA3") + "\"";
  auto many = c.Post("/v1/systemone", request_with("[" + one + "," + one + "," + one + "]"), "application/json");
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 422);
  EXPECT_EQ(nlohmann::json::parse(many->body)["detail"][0]["msg"], "at most 2 videos are allowed; got 3");
}

}  // namespace
}  // namespace stave
