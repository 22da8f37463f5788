// Videos in a request (issue 28): the accepted forms, the refusals that name the field, the
// limits; the media segment of a video (timestamps, <|video_pad|> typed 2) and its M-RoPE
// positions (one t = 1 grid per temporal group, as get_rope_index splits them).
#include <gtest/gtest.h>

#include <memory>

#include "decide/image_input.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "test_vision_util.h"
#include "text/tokenizer.h"
#include "decide/media_tokens.h"
#include "vision/mrope_positions.h"

namespace stave {
namespace {

const char* kHead = R"({"model":"m","state":1,"questions":{"a":{"type":"noul"}},"videos":)";

std::string with_videos(const std::string& videos) { return std::string(kHead) + videos + "}"; }

std::string error_of(std::string_view text, const RequestLimits& limits = {}) {
  try {
    parse_decision_request(text, limits);
  } catch (const RequestValidationError& e) {
    return e.what();
  }
  return "";
}

const std::string kB64 = encode_base64("\x1A\x45\xDF\xA3 not really a video");
const std::string kPng = encode_base64("\x89PNG\r\n\x1a\n....");

TEST(VideoRequest, AcceptedForms) {
  const DecisionRequest r = parse_decision_request(with_videos(
      R"(["data:video/mp4;base64,)" + kB64 + R"(", {"content_type":"video/webm","base64":")" + kB64 +
      R"("}, ["data:image/png;base64,)" + kPng + R"(", {"content_type":"image/png","base64":")" + kPng + R"("}]])"));
  ASSERT_EQ(r.videos.size(), 3u);
  EXPECT_EQ(r.videos[0].content_type, "video/mp4");
  EXPECT_EQ(r.videos[0].data.substr(0, 4), "\x1A\x45\xDF\xA3");
  EXPECT_EQ(r.videos[1].content_type, "video/webm");
  EXPECT_TRUE(r.videos[2].data.empty());
  ASSERT_EQ(r.videos[2].frames.size(), 2u);
  EXPECT_EQ(r.videos[2].frames[1].content_type, "image/png");
  // video/quicktime and video/matroska are aliases
  EXPECT_EQ(parse_decision_request(with_videos(R"(["data:video/quicktime;base64,)" + kB64 + R"("])"))
                .videos[0].content_type,
            "video/mp4");
}

TEST(VideoRequest, RefusalsNameTheField) {
  EXPECT_EQ(error_of(with_videos(R"(["https://example.com/a.mp4"])")),
            "videos[0]: remote video URLs are not supported; send the video inline as a data URL "
            "(data:video/mp4;base64,...), an object {\"content_type\", \"base64\"} or an array of images (its frames)");
  EXPECT_EQ(error_of(with_videos(R"(["clips/a.mp4"])")),
            "videos[0]: must be a data URL (data:video/mp4;base64,...), an object {\"content_type\", \"base64\"} or "
            "an array of images (its frames); file paths are not read here");
  EXPECT_EQ(error_of(with_videos(R"(["data:video/avi;base64,AAAA"])")),
            "videos[0]: data URL media type must be video/mp4, video/webm or video/x-matroska, not 'video/avi'");
  EXPECT_EQ(error_of(with_videos(R"([["frames/0.png"]])")).rfind("videos[0]: frame 0: must be", 0), 0u);
  EXPECT_EQ(error_of(with_videos(R"([[]])")), "videos[0]: a video given as frames needs at least one image");
  EXPECT_EQ(error_of(with_videos(R"("x")")), "videos must be an array");
  EXPECT_EQ(error_of(with_videos(R"([{"content_type":"video/mp4","base64":"abc"}])")).rfind("videos[0]: invalid base64", 0),
            0u);
}

TEST(VideoRequest, Limits) {
  RequestLimits l;
  l.max_videos = 1;
  const std::string one = R"("data:video/mp4;base64,)" + kB64 + R"(")";
  EXPECT_EQ(error_of(with_videos("[" + one + "," + one + "]"), l), "at most 1 videos are allowed; got 2");
  l.max_videos.reset();
  l.max_video_bytes = 8;
  EXPECT_EQ(error_of(with_videos("[" + one + "]"), l), "videos[0]: video is 23 bytes; the limit is 8 bytes per video");
  l.max_video_bytes.reset();
  l.max_video_frames = 1;
  const std::string png = R"("data:image/png;base64,)" + kPng + R"(")";
  EXPECT_EQ(error_of(with_videos("[[" + png + "," + png + "]]"), l), "videos[0]: at most 1 frames are allowed; got 2");
  // The server's defaults (Workers AI's set plus stave's video limits) keep videos; the
  // hosted schema alone refuses them.
  EXPECT_EQ(error_of(with_videos("[" + one + "]"), RequestLimits::workers_ai()), "videos are not supported");
}

TEST(VideoRequest, UnknownFieldsInStrictMode) {
  RequestLimits l;
  l.reject_unknown_fields = true;
  EXPECT_EQ(error_of(with_videos(R"([{"content_type":"video/mp4","base64":")" + kB64 + R"(","fps":3}])"), l),
            "videos[0]: unknown field 'fps'");
}

// ---- media segment and positions
const Tokenizer& fixture_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  return *tok;
}

TEST(VideoMediaSegment, TimestampedGroupsAfterTheImages) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const Tokenizer& tok = fixture_tokenizer();
  const ModelConfig cfg =
      parse_model_config(read_file(test::fixture("public/model-bf16/config.json")), "config.json");
  const MediaTokenIds ids = media_token_ids(tok, cfg);
  ASSERT_EQ(ids.video_pad, *tok.token_to_id("<|video_pad|>"));
  EncodedMedia media;
  // one image (2x2 merged) and one video of 2 temporal groups of 1x2 merged
  const auto got = media_segment_ids({{1, 4, 4}}, {VideoSegment{{2, 2, 4}, {0.3, 1.625}}}, ids, 2, &media);
  std::vector<int32_t> want = {ids.vision_start, ids.image_pad, ids.image_pad, ids.image_pad, ids.image_pad,
                               ids.vision_end};
  std::vector<int32_t> types(6, 0);
  for (int k = 1; k <= 4; ++k) types[k] = 1;
  // The video keeps the outer <|vision_start|> … <|vision_end|> of its prompt placeholder around
  // the timestamped groups (the reference processor's ids in tests/data/video say so).
  want.push_back(ids.vision_start);
  types.push_back(0);
  for (const char* ts : {"<0.3 seconds>", "<1.6 seconds>"}) {
    const auto t = tok.encode(ts);
    want.insert(want.end(), t.begin(), t.end());
    types.insert(types.end(), t.size(), 0);
    want.insert(want.end(), {ids.vision_start, ids.video_pad, ids.video_pad, ids.vision_end});
    types.insert(types.end(), {0, 2, 2, 0});
  }
  want.push_back(ids.vision_end);
  types.push_back(0);
  want.insert(want.end(), ids.newline.begin(), ids.newline.end());
  types.insert(types.end(), ids.newline.size(), 0);
  EXPECT_EQ(got, want);
  EXPECT_EQ(media.mm_token_type_ids, types);
  EXPECT_EQ(media.video_grid_thw, (std::vector<std::array<int64_t, 3>>{{2, 2, 4}}));
}

// A video of grid (2, 2, 4) -> two t = 1 groups of 1x2 merged, each placed like an image at its
// own cur, separated by text.
TEST(MropePositions, VideoGroupsAreSplit) {
  EncodedMedia media;
  media.token_offset = 1;
  media.video_grid_thw = {{2, 2, 4}};
  //                       ts vs  v  v  ve ts vs v  v  ve
  media.mm_token_type_ids = {0, 0, 2, 2, 0, 0, 0, 2, 2, 0};
  const int64_t L = 12;
  const MropePositions pos = mrope_position_ids(L, &media, 2);
  const int32_t* T = pos.ids.data();
  const int32_t* H = T + L;
  const int32_t* W = H + L;
  // p0 text 0; p1,p2 text 1,2; group 1 at p3,p4: cur 3 -> (3,3,3),(3,3,4), advance 2;
  // p5..p7 text 5,6,7; group 2 at p8,p9: (8,8,8),(8,8,9); p10 text 10; p11 text 11.
  EXPECT_EQ((std::vector<int32_t>(T, T + L)), (std::vector<int32_t>{0, 1, 2, 3, 3, 5, 6, 7, 8, 8, 10, 11}));
  EXPECT_EQ((std::vector<int32_t>(H, H + L)), (std::vector<int32_t>{0, 1, 2, 3, 3, 5, 6, 7, 8, 8, 10, 11}));
  EXPECT_EQ((std::vector<int32_t>(W, W + L)), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(pos.rope_delta, 0);
}

TEST(MropePositions, RefusesVideoGroupCountMismatch) {
  EncodedMedia media;
  media.video_grid_thw = {{2, 2, 4}};
  media.mm_token_type_ids = {0, 2, 2, 0};  // one group's tokens for a two-group video
  EXPECT_THROW(mrope_position_ids(4, &media, 2), Error);
}

}  // namespace
}  // namespace stave
