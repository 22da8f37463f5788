// End to end through the public API: every public fixture case and every alt case, BF16 and
// MXFP4, `--precision exact`: error texts, responses and head logits against the reference.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stave/engine.h"
#include "synth/synth_release.h"
#include "test_util.h"

namespace stave {
namespace {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using ::stave::test::same_within_one_unit;

struct CaseResult {
  double max_logit_diff = 0;
  bool response_equal = true;      // identical, every number included
  bool response_within = true;     // identical but for 4-decimal numbers one unit apart
};

// Runs one case folder (request.json + expected-<variant>.json) on `engine`.
CaseResult run_case(const Engine& engine, const std::string& dir, const std::string& variant) {
  CaseResult r;
  const ojson expected = ojson::parse(read_file(dir + "/expected-" + variant + ".json"));
  DecideOptions o;
  o.max_length = expected["max_length"].get<int64_t>();
  o.include_logits = true;
  const std::string request = read_file(dir + "/request.json");
  if (expected.contains("error")) {
    try {
      engine.decide(request, o);
      ADD_FAILURE() << dir << ": expected error " << expected["error"];
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), expected["error"].get<std::string>()) << dir;
    }
    return r;
  }
  const Decision d = engine.decide(request, o);
  ojson got = ojson::parse(d.json);
  const ojson got_logits = got["logits"];
  got.erase("logits");
  r.response_equal = got == expected["response"];
  r.response_within = same_within_one_unit(got, expected["response"]);
  EXPECT_EQ(d.usage.input_tokens, static_cast<int64_t>(expected["input_ids"].size())) << dir;
  const auto& questions = expected["questions"];
  for (size_t q = 0; q < questions.size(); ++q) {
    const auto& want = expected["logits"][q];
    const auto& have = got_logits[questions[q]["id"].get<std::string>()];
    EXPECT_EQ(have.size(), want.size()) << dir;
    for (size_t i = 0; i < want.size() && i < have.size(); ++i)
      r.max_logit_diff = std::max(r.max_logit_diff, std::fabs(have[i].get<double>() - want[i].get<double>()));
  }
  return r;
}

void run_all(const std::string& model_dir, const std::string& cases_dir, const std::string& variant,
             double logit_tolerance) {
  EngineOptions eo;
  eo.model = model_dir;
  eo.precision = Precision::kExact;
  auto engine = Engine::load(eo);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(cases_dir))
    if (fs::exists(e.path() / ("expected-" + variant + ".json"))) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_FALSE(names.empty());
  double worst = 0;
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    CaseResult r = run_case(*engine, cases_dir + "/" + n, variant);
    worst = std::max(worst, r.max_logit_diff);
    std::printf("[ decide ] %s %-40s max |Δlogit| %.3g%s\n", variant.c_str(), n.c_str(), r.max_logit_diff,
                r.response_equal ? "" : (r.response_within ? "  (a rounded value one unit off)" : "  RESPONSE DIFFERS"));
    EXPECT_LE(r.max_logit_diff, logit_tolerance);
    EXPECT_TRUE(r.response_within);
  }
  std::printf("[ decide ] %s: %zu cases, worst |Δlogit| %.3g\n", variant.c_str(), names.size(), worst);
}

TEST(DecideFixtures, Bf16Exact) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  run_all(test::fixture("public/model-bf16"), test::fixture("public/cases"), "bf16", 1e-4);
}

TEST(DecideFixtures, Mxfp4Exact) {
  STAVE_REQUIRE_FIXTURE("public/model-mxfp4/config.json");
  run_all(test::fixture("public/model-mxfp4"), test::fixture("public/cases"), "mxfp4", 1e-4);
}

void run_alt(const std::string& format) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const std::string data = std::string(STAVE_SOURCE_DIR) + "/tests/data/alt";
  const std::string dir = test::synth_alt_release(format, "decide");
  run_all(dir, data + "/cases", format, 1e-4);
  fs::remove_all(dir);
}

TEST(DecideFixtures, AltBf16Exact) { run_alt("bf16"); }
TEST(DecideFixtures, AltMxfp4Exact) { run_alt("mxfp4"); }

}  // namespace
}  // namespace stave
