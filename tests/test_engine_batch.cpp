// Engine::decide_batch on the CPU: the same decisions as decide() one by one (the CPU runs the
// batch's prefills one after another, so the JSON is identical), an empty batch, and a request
// that cannot be encoded failing the whole batch with decide()'s error. The packed GPU prefill
// is compared in tests/cuda/test_cuda_fixtures.cpp.
#include <gtest/gtest.h>

#include <filesystem>

#include "stave/engine.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave {
namespace {
namespace fs = std::filesystem;

TEST(EngineBatch, CpuBatchGivesTheDecisionsOfDecide) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  STAVE_REQUIRE_FIXTURE("public/cases");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  eo.precision = Precision::kFast;
  auto engine = Engine::load(eo);
  std::vector<Request> requests;
  for (const char* name : {"000-docs-example", "001-card-example", "004-unicode-state"})
    requests.push_back(Request::parse(read_file(test::fixture(std::string("public/cases/") + name) +
                                                        "/request.json")));
  DecideOptions o;
  o.include_logits = true;
  const std::vector<Decision> batch = engine->decide_batch(requests, o);
  ASSERT_EQ(batch.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Decision one = engine->decide(requests[i], o);
    EXPECT_EQ(batch[i].json, one.json) << i;
    EXPECT_EQ(batch[i].usage.input_tokens, one.usage.input_tokens);
    EXPECT_GT(batch[i].timings.backbone_ms, 0.0);
  }
  EXPECT_TRUE(engine->decide_batch({}, o).empty());
}

TEST(EngineBatch, ARequestThatCannotBeEncodedFailsTheBatch) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  STAVE_REQUIRE_FIXTURE("public/cases");
  EngineOptions eo;
  eo.model = test::fixture("public/model-bf16");
  auto engine = Engine::load(eo);
  std::vector<Request> requests;
  requests.push_back(
      Request::parse(read_file(test::fixture("public/cases/000-docs-example") + "/request.json")));
  requests.push_back(requests.front());
  DecideOptions o;
  o.max_length = 8;  // far too short for the prompt: decide() refuses it
  o.truncation = TruncationPolicy::kRefuse;
  std::string single;
  try {
    engine->decide(requests.front(), o);
    FAIL() << "decide accepted max_length 8";
  } catch (const Error& e) {
    single = e.what();
  }
  try {
    engine->decide_batch(requests, o);
    FAIL() << "decide_batch accepted max_length 8";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), single);
  }
}

}  // namespace
}  // namespace stave
