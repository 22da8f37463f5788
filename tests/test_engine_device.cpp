// EngineOptions::device: "cpu" is the default and runs the CPU backbone; an unknown device is
// an Error naming it (the CUDA device itself is tested in tests/cuda on a GPU machine).
#include <gtest/gtest.h>

#include "stave/engine.h"
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

}  // namespace
}  // namespace stave
