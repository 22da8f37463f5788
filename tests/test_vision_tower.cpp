// The vision tower: position signals against the spec's formulas, and the fixture model's
// tower for shape and consistency (items are independent: one call with two images equals two
// calls). The numeric oracle for the tower is end to end (test_vision_end_to_end.cpp).
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "io/tensor_store.h"
#include "stave/errors.h"
#include "test_vision_util.h"
#include "vision/image_decode.h"
#include "vision/preprocess.h"
#include "vision/vision_embeddings.h"
#include "vision/vision_tower.h"

namespace stave {
namespace {

TEST(VisionEmbeddings, LinspaceEndpointsAndSymmetry) {
  std::vector<float> v = torch_linspace_f32(0.0f, 3.0f, 4);
  EXPECT_EQ(v, (std::vector<float>{0, 1, 2, 3}));
  v = torch_linspace_f32(0.0f, 47.0f, 30);
  EXPECT_EQ(v.front(), 0.0f);
  EXPECT_EQ(v.back(), 47.0f);
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(v[i], 47.0 * i / 29.0, 1e-5);
}

// A table that is affine in (row, col) is reproduced exactly by bilinear interpolation, so
// each patch must get a*y + b*x + c with y = row*(side-1)/(h-1) (align_corners=True) at the
// (row, col) that merge-block-major order puts at that index (qwen35.md §4.1, §4.2).
TEST(VisionEmbeddings, PositionInterpolationIsBilinearInMergeBlockOrder) {
  const int64_t side = 4, dim = 3, merge = 2;
  std::vector<float> table(side * side * dim);
  for (int64_t r = 0; r < side; ++r)
    for (int64_t c = 0; c < side; ++c) {
      table[(r * side + c) * dim + 0] = static_cast<float>(r);
      table[(r * side + c) * dim + 1] = static_cast<float>(c);
      table[(r * side + c) * dim + 2] = static_cast<float>(2 * r - 3 * c + 1);
    }
  const std::array<int64_t, 3> grid{2, 6, 10};
  std::vector<float> pe = interpolated_position_embeddings(table, side, dim, grid, merge);
  ASSERT_EQ(pe.size(), static_cast<size_t>(2 * 6 * 10 * dim));
  int64_t i = 0;
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t bh = 0; bh < 3; ++bh)
      for (int64_t bw = 0; bw < 5; ++bw)
        for (int64_t mh = 0; mh < 2; ++mh)
          for (int64_t mw = 0; mw < 2; ++mw, ++i) {
            const double row = bh * 2 + mh, col = bw * 2 + mw;
            const double y = row * (side - 1) / (6 - 1.0), x = col * (side - 1) / (10 - 1.0);
            EXPECT_NEAR(pe[i * dim + 0], y, 1e-5) << i;
            EXPECT_NEAR(pe[i * dim + 1], x, 1e-5) << i;
            EXPECT_NEAR(pe[i * dim + 2], 2 * y - 3 * x + 1, 1e-5) << i;
          }
}

TEST(VisionEmbeddings, RotaryRowsThenColumnsRepeatedTwice) {
  const int64_t head_dim = 72;  // the real model: 18 frequencies per axis
  const std::array<int64_t, 3> grid{1, 4, 6};
  RotaryTables rt = vision_rotary(grid, 2, head_dim, 10000.0);
  ASSERT_EQ(rt.cos.size(), static_cast<size_t>(24 * head_dim));
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t bh = i / 12, bw = (i / 4) % 3, mh = (i / 2) % 2, mw = i % 2;
    const double row = bh * 2 + mh, col = bw * 2 + mw;
    for (int64_t j = 0; j < 18; ++j) {
      const double inv = std::pow(10000.0, -2.0 * j / 36.0);
      for (int64_t rep = 0; rep < 2; ++rep) {
        EXPECT_NEAR(rt.cos[i * head_dim + rep * 36 + j], std::cos(row * inv), 2e-6);
        EXPECT_NEAR(rt.sin[i * head_dim + rep * 36 + 18 + j], std::sin(col * inv), 2e-6);
      }
    }
  }
}

class FixtureTower : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(test::fixture("public/model-bf16/config.json"))) {
      if (test::fixtures_required()) FAIL() << "missing fixture model";
      GTEST_SKIP() << "fixture model not found";
    }
    config_ = parse_model_config(read_file(test::fixture("public/model-bf16/config.json")), "config.json");
    store_ = TensorStore::open_checkpoint(test::fixture("public/model-bf16"));
  }
  std::vector<VisionPatches> case_patches(const std::string& name) {
    std::vector<VisionPatches> out;
    for (auto& [type, bytes] : test::case_images(name))
      out.push_back(preprocess_image(decode_image(type, bytes, "image"), test::fixture_processor_config()));
    return out;
  }
  ModelConfig config_;
  TensorStore store_;
};

TEST_F(FixtureTower, ShapesAndFiniteOutput) {
  VisionTower tower(config_, store_);
  auto patches = case_patches("017-image-one");
  ASSERT_EQ(patches.size(), 1u);
  ASSERT_EQ(patches[0].row_size, tower.row_size());
  VisionTower::Output out = tower.forward(patches[0].pixel_values.data(), patches[0].rows, {patches[0].grid_thw});
  const int64_t merged = merged_token_count(patches[0].grid_thw, 2);
  EXPECT_EQ(out.merged.size(), static_cast<size_t>(merged * config_.vision.out_hidden_size));
  EXPECT_EQ(out.last_hidden_state.size(), static_cast<size_t>(patches[0].rows * config_.vision.hidden_size));
  for (float v : out.merged) ASSERT_TRUE(std::isfinite(v));
  double norm = 0;
  for (float v : out.merged) norm += v * v;
  EXPECT_GT(norm, 0.0);
}

// Items are independent up to rounding only: the merger's linears take MKL's few-row kernel or
// its FMA chain by the number of rows (torch_linear_order.h), as the reference does, so the same
// item alone or beside another differs by a few ulps (observed 1.5e-6). Attention leaking across
// items would move features by orders of magnitude more.
constexpr double kRowCountRounding = 1e-5;

TEST_F(FixtureTower, ItemsAreIndependent) {
  VisionTower tower(config_, store_);
  auto patches = case_patches("018-image-two");
  ASSERT_EQ(patches.size(), 2u);
  std::vector<float> both = patches[0].pixel_values;
  both.insert(both.end(), patches[1].pixel_values.begin(), patches[1].pixel_values.end());
  VisionTower::Output joint =
      tower.forward(both.data(), patches[0].rows + patches[1].rows, {patches[0].grid_thw, patches[1].grid_thw});
  std::vector<float> separate;
  for (const auto& p : patches) {
    VisionTower::Output o = tower.forward(p.pixel_values.data(), p.rows, {p.grid_thw});
    separate.insert(separate.end(), o.merged.begin(), o.merged.end());
  }
  ASSERT_EQ(joint.merged.size(), separate.size());
  for (size_t i = 0; i < separate.size(); ++i) ASSERT_NEAR(joint.merged[i], separate[i], kRowCountRounding) << i;
}

TEST_F(FixtureTower, TemporalDuplicateEqualsOneFrameItem) {
  // A still image is a 2-frame item of identical frames; attention runs per temporal group,
  // so an item with grid_t = 2 made of the same image twice gives the same features twice.
  VisionTower tower(config_, store_);
  auto patches = case_patches("017-image-one");
  const VisionPatches& p = patches[0];
  std::vector<float> two = p.pixel_values;
  two.insert(two.end(), p.pixel_values.begin(), p.pixel_values.end());
  const std::array<int64_t, 3> g2{2, p.grid_thw[1], p.grid_thw[2]};
  VisionTower::Output o2 = tower.forward(two.data(), 2 * p.rows, {g2});
  VisionTower::Output o1 = tower.forward(p.pixel_values.data(), p.rows, {p.grid_thw});
  ASSERT_EQ(o2.merged.size(), 2 * o1.merged.size());
  for (size_t i = 0; i < o1.merged.size(); ++i) {
    ASSERT_NEAR(o2.merged[i], o1.merged[i], kRowCountRounding);
    ASSERT_NEAR(o2.merged[o1.merged.size() + i], o1.merged[i], kRowCountRounding);
  }
}

TEST_F(FixtureTower, RefusesRowCountMismatch) {
  VisionTower tower(config_, store_);
  std::vector<float> pv(16 * tower.row_size());
  EXPECT_THROW(tower.forward(pv.data(), 15, {{1, 4, 4}}), Error);
}

}  // namespace
}  // namespace stave
