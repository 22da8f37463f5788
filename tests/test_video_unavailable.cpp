// A build configured with -DSTAVE_VIDEO=OFF (no FFmpeg): a video input is refused with an error
// that names it and says why, and a request without video is answered as usual.
#include <gtest/gtest.h>

#include <string>

#include "decide/image_input.h"
#include "stave/engine.h"
#include "stave/errors.h"
#include "test_util.h"

namespace stave {
namespace {

TEST(VideoUnavailable, VideoInputsAreRefusedNamingTheBuild) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  eo.precision = Precision::kFast;
  auto engine = Engine::load(eo);
  const std::string base =
      R"({"model":"clef","state":"a clip","questions":{"ok":{"type":"noul","instructions":"Fine?"}})";
  EXPECT_NO_THROW(engine->decide(base + "}"));
  try {
    engine->decide(base + R"(,"videos":["data:video/mp4;base64,)" + encode_base64("not decoded") + "\"]}");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("video 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("STAVE_VIDEO=OFF"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stave
