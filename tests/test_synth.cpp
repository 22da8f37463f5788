#include <cmath>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "io/release.h"
#include "io/safetensors.h"
#include "model/model_check.h"
#include "formats/mxfp4.h"
#include "synth/synth_release.h"
#include "test_util.h"
#include "util/bf16.h"

namespace stave {
namespace {
namespace fs = std::filesystem;

synth::SynthOptions options(const std::string& preset, const std::string& format, const std::string& out, uint64_t seed) {
  synth::SynthOptions o;
  o.preset = preset;
  o.format = format;
  o.out = out;
  o.seed = seed;
  o.tokenizer = test::fixture("public/model-bf16/tokenizer.json");
  return o;
}

TEST(Synth, TinyAndAltPresetsAreLoadableReleases) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  for (std::string preset : {"tiny", "alt"}) {
    for (std::string format : {"bf16", "mxfp4"}) {
      std::string dir = stave::test::temp_dir() + "/synth-" + preset + "-" + format;
      fs::remove_all(dir);
      synth::synth_release(options(preset, format, dir, 7));
      auto r = open_release(dir);
      EXPECT_NO_THROW(check_release_loadable(*r)) << preset << " " << format;
      EXPECT_TRUE(synth::is_synthetic_release(dir));
      EXPECT_EQ(r->config.quantization_config_json.empty(), format == "bf16");
    }
  }
}

TEST(Synth, SameSeedSameBytesAndMxfp4IsTheQuantizedBf16) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  std::string a = stave::test::temp_dir() + "/synth-a", b = stave::test::temp_dir() + "/synth-b",
              q = stave::test::temp_dir() + "/synth-q";
  for (auto& d : {a, b, q}) fs::remove_all(d);
  synth::synth_release(options("tiny", "bf16", a, 3));
  synth::synth_release(options("tiny", "bf16", b, 3));
  synth::synth_release(options("tiny", "mxfp4", q, 3));
  auto ra = open_release(a), rb = open_release(b), rq = open_release(q);
  const std::string w = "model.language_model.layers.0.mlp.down_proj.weight";
  const TensorRef& ta = ra->weights.get(w);
  const TensorRef& tb = rb->weights.get(w);
  ASSERT_EQ(ta.nbytes, tb.nbytes);
  EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0);
  // The MXFP4 release's codes dequantize to the BF16 weights' MXFP4 rounding: check that each
  // dequantized value is within half an E2M1 step of the BF16 value (and exactly 0 when tiny).
  const TensorRef& codes = rq->weights.get(w);
  const TensorRef& scales = rq->weights.get("model.language_model.layers.0.mlp.down_proj.weight_scale");
  const int64_t k = ta.shape[1];
  std::vector<float> row(k), deq(k);
  for (int64_t r = 0; r < ta.shape[0]; ++r) {
    for (int64_t i = 0; i < k; ++i) {
      uint16_t h;
      std::memcpy(&h, ta.data + 2 * (r * k + i), 2);
      row[i] = bf16_to_f32(h);
    }
    mxfp4::dequantize_row(codes.data + r * k / 2, scales.data + r * k / 32, k, deq.data());
    for (int64_t blk = 0; blk < k / 32; ++blk) {
      float scale = mxfp4::exp2_int(scales.data[r * k / 32 + blk] - 127);
      for (int i = 0; i < 32; ++i) {
        float x = row[blk * 32 + i], y = deq[blk * 32 + i];
        // E2M1 steps are at most 2 units of the scale (between 4 and 6).
        EXPECT_LE(std::fabs(x - y), 1.0f * scale + 1e-30f) << r << "," << blk * 32 + i;
      }
    }
  }
}

}  // namespace
}  // namespace stave
