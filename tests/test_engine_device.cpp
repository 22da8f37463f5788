// EngineOptions::device: "cpu" is the default and runs the CPU backbone; an unknown device is
// an Error naming it (the CUDA device itself is tested in tests/cuda on a GPU machine).
#include <gtest/gtest.h>

#include "stave/engine.h"
#include "test_util.h"

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

}  // namespace
}  // namespace stave
