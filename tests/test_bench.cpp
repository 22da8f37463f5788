// stave bench's library part: requests of an exact encoded length, the statistics, and a run
// with --batch; stave bench-decode's run on the fixture release.
#include <gtest/gtest.h>

#include "measure/bench_run.h"
#include "measure/decode_bench.h"
#include "measure/stats.h"
#include "measure/synthetic_request.h"
#include "decide/encoder.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "test_util.h"
#include "text/tokenizer.h"

namespace stave {
namespace {

int64_t encoded_length(const Tokenizer& tok, const std::string& json) {
  EncodeOptions eo;
  eo.max_length = 1 << 20;
  return static_cast<int64_t>(encode_request(parse_decision_request(json), tok, eo).input_ids.size());
}

TEST(BenchRequest, EncodedLengthIsExactlyTheTarget) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  auto tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  // (The Clef prompt alone is 139 tokens with one question, 683 with seven.)
  const std::vector<std::pair<int, std::vector<int64_t>>> cases = {
      {1, {139, 140, 256, 257, 512, 2048, 8192}}, {3, {512, 801, 2048}}, {7, {800, 801, 2048, 8192}}};
  for (const auto& [questions, targets] : cases) {
    for (int64_t target : targets) {
      measure::SyntheticRequestSpec spec{target, questions, std::nullopt};
      int calls = 0;
      auto r = measure::synthesize_request(spec, [&](const std::string& j) {
        ++calls;
        return encoded_length(*tok, j);
      });
      // Checked independently of the synthesizer's own bookkeeping: encode the body again.
      EXPECT_EQ(encoded_length(*tok, r.json), target) << questions << " questions, " << target;
      EXPECT_EQ(r.tokens, target);
      EXPECT_EQ(r.fixed_tokens + r.state_tokens, target);
      EXPECT_EQ(parse_decision_request(r.json).questions.size(), static_cast<size_t>(questions));
      EXPECT_LE(calls, 6) << "the state search should settle in a few steps";
    }
  }
}

TEST(BenchRequest, ExactWithAnImageCountedByTheMeasure) {
  // The measure decides what counts; here a fake one adds a fixed image cost to text tokens.
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  auto tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  measure::SyntheticRequestSpec spec{600, 2, measure::ImageSize{64, 48}};
  auto measure = [&](const std::string& j) {
    DecisionRequest req = parse_decision_request(j);
    EXPECT_EQ(req.images.size(), 1u);
    EXPECT_EQ(req.images[0].content_type, "image/png");
    req.images.clear();
    EncodeOptions eo;
    eo.max_length = 1 << 20;
    return static_cast<int64_t>(encode_request(req, *tok, eo).input_ids.size()) + 100;
  };
  auto r = measure::synthesize_request(spec, measure);
  EXPECT_EQ(measure(r.json), 600);
}

TEST(BenchRequest, TargetBelowTheSchemaIsAClearError) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  auto tok = Tokenizer::from_file(test::fixture("public/model-bf16/tokenizer.json"));
  measure::SyntheticRequestSpec spec{20, 3, std::nullopt};
  try {
    measure::synthesize_request(spec, [&](const std::string& j) { return encoded_length(*tok, j); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_NE(std::string(e.what()).find("--prompt-tokens 20 is below"), std::string::npos) << e.what();
  }
}

TEST(BenchRequest, ParsesTokenListsAndImageSizes) {
  EXPECT_EQ(measure::parse_token_list("128,512,2048,8192"), (std::vector<int64_t>{128, 512, 2048, 8192}));
  EXPECT_THROW(measure::parse_token_list("128,,512"), Error);
  EXPECT_THROW(measure::parse_token_list("12x"), Error);
  EXPECT_THROW(measure::parse_token_list("-5"), Error);
  try {
    measure::parse_token_list("1,x", "--batch");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--batch takes positive counts separated by commas (like 128,512); bad item \"x\"");
  }
  auto s = measure::parse_image_size("640x480");
  EXPECT_EQ(s.width, 640);
  EXPECT_EQ(s.height, 480);
  EXPECT_THROW(measure::parse_image_size("640"), Error);
  EXPECT_THROW(measure::parse_image_size("0x5"), Error);
  EXPECT_THROW(measure::parse_image_size("5x5x"), Error);
}

// Expected values are numpy.percentile's (method="linear"), worked by hand here.
TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v{5, 1, 4, 2, 3};  // sorted 1..5
  EXPECT_DOUBLE_EQ(measure::percentile(v, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(measure::percentile(v, 0.9), 4.6);  // rank 3.6
  EXPECT_DOUBLE_EQ(measure::percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(measure::percentile(v, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(measure::percentile({10, 20}, 0.5), 15.0);
  EXPECT_DOUBLE_EQ(measure::percentile({10, 20, 30, 40}, 0.9), 37.0);  // rank 2.7
  EXPECT_DOUBLE_EQ(measure::percentile({7}, 0.9), 7.0);
  EXPECT_THROW(measure::percentile({}, 0.5), Error);
  EXPECT_THROW(measure::percentile({1}, 1.5), Error);
}

TEST(BenchStats, SummaryMeanStddevMinMax) {
  auto s = measure::summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.n, 8);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.stddev, 2.138089935, 1e-9);  // sqrt(32/7)
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.p50, 4.5);
  EXPECT_DOUBLE_EQ(measure::summarize({3}).stddev, 0.0);
}

// --batch: each timed run is B decisions through Engine::decide_batch; the throughput counts
// all B requests' tokens, and a batch outside 1 … 4096 is refused.
TEST(BenchRun, BatchRunsCountEveryRequestsTokens) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16");
  measure::BenchOptions o;
  o.model = test::fixture("public/model-bf16");
  o.prompt_tokens = {170};
  o.repeat = 2;
  o.warmup = 0;
  o.threads = 1;
  o.batch = 3;
  const measure::BenchReport r = measure::run_bench(o);
  ASSERT_EQ(r.results.size(), 1u);
  const measure::LengthResult& x = r.results[0];
  EXPECT_EQ(x.batch, 3);
  EXPECT_EQ(x.prompt_tokens, 170);
  ASSERT_GT(x.backbone_ms.p50, 0.0);
  // The CPU runs the three prefills one after another: the run's backbone time is theirs.
  EXPECT_NEAR(x.prefill_tokens_per_s, 1000.0 * 3 * 170 / (x.backbone_ms.p50 + x.vision_ms.p50),
              1e-6 * x.prefill_tokens_per_s);
  EXPECT_GE(x.total_ms.p50, x.backbone_ms.p50);
  EXPECT_NE(measure::markdown_table(r).find("pp170 × 3"), std::string::npos) << measure::markdown_table(r);
  EXPECT_EQ(measure::to_json(r)["results"][0]["batch"], 3);
  for (int bad : {0, -1, 5000}) {
    o.batch = bad;
    EXPECT_THROW(measure::run_bench(o), Error) << bad;
  }
}

// A tiny run: every length reports what it timed (exactly new_tokens tokens each run); bad
// options are errors naming them.
TEST(BenchDecode, TimesEveryLengthAndRefusesBadOptions) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  measure::DecodeBenchOptions o;
  o.model = test::fixture("public/model-bf16");
  o.prompt_tokens = {3, 9};
  o.new_tokens = 4;
  o.repeat = 2;
  o.warmup = 0;
  o.threads = 1;
  const measure::DecodeReport r = measure::run_decode_bench(o);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[1].prompt_tokens, 9);
  for (const auto& x : r.results) {
    EXPECT_EQ(x.ttft_ms.n, 2);
    EXPECT_GT(x.ttft_ms.min, 0.0);
    EXPECT_GT(x.decode_tokens_per_s.min, 0.0);
    EXPECT_EQ(x.inter_token_ms.n, 2 * 3);  // 3 gaps between 4 tokens, 2 runs
  }
  const auto j = measure::to_json(r);
  EXPECT_EQ(j["results"][0]["batch"], 1);
  EXPECT_EQ(j["results"][0]["new_tokens"], 4);
  EXPECT_NE(measure::markdown_table(r).find("| 9 | 4 | 2 |"), std::string::npos) << measure::markdown_table(r);
  o.new_tokens = 1;
  EXPECT_THROW(measure::run_decode_bench(o), Error);
  o.new_tokens = 4;
  o.prompt_tokens = {0};
  EXPECT_THROW(measure::run_decode_bench(o), Error);
  o.prompt_tokens = {3};
  o.batches = {0};
  EXPECT_THROW(measure::run_decode_bench(o), Error);
}

// Batches above 1 run through the continuous-batching scheduler: every request of every run
// reports its first token, every gap between its tokens, and the batch's aggregate rate.
TEST(BenchDecode, BatchesRunThroughTheScheduler) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  measure::DecodeBenchOptions o;
  o.model = test::fixture("public/model-bf16");
  o.prompt_tokens = {5};
  o.batches = {1, 3};
  o.new_tokens = 4;
  o.repeat = 2;
  o.warmup = 0;
  o.threads = 1;
  const measure::DecodeReport r = measure::run_decode_bench(o);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].batch, 1);
  EXPECT_EQ(r.results[1].batch, 3);
  EXPECT_EQ(r.results[1].ttft_ms.n, 2 * 3);         // 3 requests, 2 runs
  EXPECT_EQ(r.results[1].inter_token_ms.n, 2 * 3 * 3);  // 3 gaps each
  EXPECT_GT(r.results[1].decode_tokens_per_s.min, 0.0);
  EXPECT_NE(measure::markdown_table(r).find("| 5 | 4 | 2 | 3 |"), std::string::npos) << measure::markdown_table(r);
}

}  // namespace
}  // namespace stave
