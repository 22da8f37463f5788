// The media segment (ids, mm_token_type_ids, grids) against the fixtures' encode_record
// output, and M-RoPE positions against the spec's worked example.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "stave/errors.h"
#include "test_vision_util.h"
#include "text/tokenizer.h"
#include "decide/media_tokens.h"
#include "vision/mrope_positions.h"

namespace stave {
namespace {

// tokenizer.json is large: load it once for the whole binary.
const Tokenizer& fixture_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  return *tok;
}

ModelConfig fixture_model_config() {
  return parse_model_config(read_file(test::fixture("public/model-bf16/config.json")), "config.json");
}

class MediaSegmentFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(MediaSegmentFixture, MatchesEncodeRecord) {
  const std::string name = GetParam();
  STAVE_REQUIRE_FIXTURE("public/cases/" + name + "/expected-bf16.json");
  const MediaTokenIds ids = media_token_ids(fixture_tokenizer(), fixture_model_config());

  std::vector<ImageInput> images;
  for (auto& [type, bytes] : test::case_images(name)) images.push_back({type, bytes});
  PreparedMedia prepared(images, test::fixture_processor_config(), ids);
  DecisionRequest req;
  req.images = images;
  EncodedMedia media;
  std::vector<int32_t> seg = prepared.encode_media(req, &media);

  nlohmann::json expected = test::read_json(test::fixture("public/cases/" + name + "/expected-bf16.json"));
  const auto& em = expected["media"];
  EXPECT_EQ(media.mm_token_type_ids, em["mm_token_type_ids"].get<std::vector<int32_t>>());
  ASSERT_EQ(media.image_grid_thw.size(), em["image_grid_thw"].size());
  for (size_t i = 0; i < media.image_grid_thw.size(); ++i)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(media.image_grid_thw[i][k], em["image_grid_thw"][i][k].get<int64_t>());
  const auto input_ids = expected["input_ids"].get<std::vector<int32_t>>();
  const int64_t offset = em["token_offset"].get<int64_t>();
  ASSERT_LE(offset + static_cast<int64_t>(seg.size()), static_cast<int64_t>(input_ids.size()));
  std::vector<int32_t> want(input_ids.begin() + offset, input_ids.begin() + offset + seg.size());
  EXPECT_EQ(seg, want);

  // Positions over the whole record: text before the media is a plain arange.
  media.token_offset = offset;
  MropePositions pos = mrope_position_ids(static_cast<int64_t>(input_ids.size()), &media, 2);
  for (int64_t p = 0; p < offset; ++p)
    for (int r = 0; r < 3; ++r) ASSERT_EQ(pos.ids[r * input_ids.size() + p], p);
  EXPECT_LT(pos.rope_delta, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, MediaSegmentFixture, ::testing::Values("017-image-one", "018-image-two"));

TEST(MediaTokenIds, RefusesConfigThatDisagreesWithTokenizer) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  ModelConfig cfg = fixture_model_config();
  cfg.image_token_id += 1;
  EXPECT_THROW(media_token_ids(fixture_tokenizer(), cfg), Error);
}

// qwen35.md §4.6 worked example: 3 text tokens + <|vision_start|> at 0-3, a 2x3 merged grid,
// <|vision_end|> at 10, more text.
TEST(MropePositions, SpecExample) {
  EncodedMedia media;
  media.token_offset = 3;
  media.image_grid_thw = {{1, 4, 6}};
  media.mm_token_type_ids = {0, 1, 1, 1, 1, 1, 1, 0, 0};
  const int64_t L = 13;
  MropePositions pos = mrope_position_ids(L, &media, 2);
  const std::vector<int32_t> T = {0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 7, 8, 9};
  const std::vector<int32_t> H = {0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 7, 8, 9};
  const std::vector<int32_t> W = {0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(std::vector<int32_t>(pos.ids.begin(), pos.ids.begin() + L), T);
  EXPECT_EQ(std::vector<int32_t>(pos.ids.begin() + L, pos.ids.begin() + 2 * L), H);
  EXPECT_EQ(std::vector<int32_t>(pos.ids.begin() + 2 * L, pos.ids.end()), W);
  EXPECT_EQ(pos.rope_delta, 9 + 1 - L);
}

TEST(MropePositions, TextOnlyIsArange) {
  MropePositions pos = mrope_position_ids(5, nullptr, 2);
  EXPECT_EQ(pos.ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(pos.rope_delta, 0);
}

TEST(MropePositions, TwoImagesAdvanceByLongerSide) {
  // Grids as fixture 018: merged 2x3 and 4x1.
  EncodedMedia media;
  media.token_offset = 1;
  media.image_grid_thw = {{1, 4, 6}, {1, 8, 2}};
  media.mm_token_type_ids = {0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0};
  MropePositions pos = mrope_position_ids(17, &media, 2);
  const int32_t* T = pos.ids.data();
  const int32_t* H = T + 17;
  const int32_t* W = H + 17;
  // Positions: text p0 -> 0, vision_start p1 -> 1, image 1 at p2..7 with cur = 2 (advance
  // max(2, 3) = 3), vision_end p8 -> 5, vision_start p9 -> 6, image 2 at p10..13 with cur = 7
  // (rows 0..3, advance 4), vision_end p14 -> 11, "\n" p15 -> 12, text p16 -> 13.
  EXPECT_EQ(T[2], 2);
  EXPECT_EQ(W[4], 4);
  EXPECT_EQ(H[7], 3);
  EXPECT_EQ(T[8], 5);
  EXPECT_EQ(T[9], 6);
  EXPECT_EQ(T[10], 7);
  EXPECT_EQ(H[13], 10);
  EXPECT_EQ(W[13], 7);
  EXPECT_EQ(T[14], 11);
  EXPECT_EQ(T[16], 13);
}

TEST(MropePositions, RefusesCountMismatch) {
  EncodedMedia media;
  media.token_offset = 0;
  media.image_grid_thw = {{1, 4, 6}};
  media.mm_token_type_ids = {0, 1, 1, 0};
  EXPECT_THROW(mrope_position_ids(4, &media, 2), Error);
}

}  // namespace
}  // namespace stave
