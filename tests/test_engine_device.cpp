// EngineOptions::device: "cpu" is the default and runs the CPU backbone; an unknown device is
// an Error naming it (the CUDA device itself is tested in tests/cuda on a GPU machine).
#include <gtest/gtest.h>

#include <limits>

#include "stave/engine.h"
#include "stave/language_model.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

TEST(EngineDevice, UnknownDeviceIsAnErrorNamingIt) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  eo.device = "tpu";
  try {
    Engine::load(eo);
    FAIL() << "device tpu was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("\"tpu\""), std::string::npos) << e.what();
  }
}

TEST(EngineDevice, CpuIsTheDefault) { EXPECT_EQ(EngineOptions{}.device, "cpu"); }

// batch_tokens packs GPU prefills; a negative count is refused before anything loads, and on
// the CPU a positive one changes nothing (decide answers as without it).
TEST(EngineDevice, BatchTokensIsCheckedAndIgnoredOnTheCpu) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  eo.batch_tokens = -1;
  EXPECT_THROW(Engine::load(eo), Error);
  eo.batch_tokens = 4096;
  const auto packed = Engine::load(eo);
  eo.batch_tokens = 0;
  const auto plain = Engine::load(eo);
  const std::string request = read_file(test::fixture("public/cases/000-docs-example") + "/request.json");
  EXPECT_EQ(packed->decide(request).json, plain->decide(request).json);
}

// fp8_cache_gib keeps FP8 weight copies on a GPU in fast precision: a size that is negative or
// not finite, or one asked for on the CPU or in exact precision, is refused before anything
// loads (the model path does not exist, so any other error would name it), by the engine and by
// the language model alike. The cache itself is tested on a GPU (tests/cuda).
TEST(EngineDevice, Fp8CacheIsCheckedBeforeAnythingLoads) {
  const auto refused = [](EngineOptions eo, const std::string& why) {
    eo.model = "/nonexistent/release";
    for (int lm = 0; lm < 2; ++lm) {
      try {
        if (lm) {
          LanguageModel::load(eo);
        } else {
          Engine::load(eo);
        }
        ADD_FAILURE() << "accepted: " << why;
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest) << e.what();
        const std::string what = e.what();
        EXPECT_NE(what.find("fp8_cache_gib"), std::string::npos) << what;
        EXPECT_NE(what.find(why), std::string::npos) << what;
      }
    }
  };
  EngineOptions eo;
  EXPECT_EQ(eo.fp8_cache_gib, 0.0);
  eo.device = "cuda";
  eo.fp8_cache_gib = -1;
  refused(eo, "at least 0");
  eo.fp8_cache_gib = std::numeric_limits<double>::quiet_NaN();
  refused(eo, "at least 0");
  eo.fp8_cache_gib = std::numeric_limits<double>::infinity();
  refused(eo, "at least 0");
  eo.fp8_cache_gib = 8;
  eo.device = "cpu";
  refused(eo, "device cuda");
  eo.device = "cuda";
  eo.precision = Precision::kExact;
  refused(eo, "precision fast");
}

// With no cache asked for, the CPU loads as before.
TEST(EngineDevice, NoFp8CacheLoadsOnTheCpu) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  eo.fp8_cache_gib = 0;
  EXPECT_NO_THROW(Engine::load(eo));
}

}  // namespace
}  // namespace stave
