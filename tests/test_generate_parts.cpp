// The parts of generation that need no model: the sampler (greedy, temperature, top-k, top-p,
// min-p, penalties, seeds) and the streamed completion text (whole UTF-8 only, stop strings).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "generate/completion_text.h"
#include "generate/logprobs.h"
#include "generate/sampler.h"
#include "stave/errors.h"

namespace stave {
namespace {

std::map<int32_t, int> histogram(SamplingOptions o, std::vector<float> logits, int draws) {
  o.seed = 1234;
  Sampler s(o);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    ++h[s.pick(l, {}, {})];
  }
  return h;
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  SamplingOptions o;
  o.temperature = 0;
  Sampler s(o);
  std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.pick(l, {}, {}), 1);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  const std::vector<float> l = {0.1f, 0.3f, 3.0f, 2.9f};
  SamplingOptions o;
  o.top_k = 1;
  EXPECT_EQ(histogram(o, l, 200), (std::map<int32_t, int>{{2, 200}}));
  o.top_k = 0;
  o.top_p = 0.01;
  EXPECT_EQ(histogram(o, l, 200), (std::map<int32_t, int>{{2, 200}}));
}

TEST(Sampler, TopKAndMinPRestrictTheCandidates) {
  const std::vector<float> l = {0.0f, 1.0f, 2.0f, 3.0f};  // p ∝ 1, e, e², e³
  SamplingOptions o;
  o.top_k = 2;
  auto h = histogram(o, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_NEAR(h[3] / 2000.0, 1.0 / (1.0 + std::exp(-1.0)), 0.04);
  o.top_k = 0;
  o.min_p = 0.3;  // keeps p ≥ 0.3 p_max: e² / e³ = 0.37 stays, e / e³ = 0.14 goes
  h = histogram(o, l, 2000);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<float> l = {0.0f, 1.0f};
  SamplingOptions o;
  o.temperature = 0.25;  // p1 = 1 / (1 + e^-4) = 0.982
  EXPECT_NEAR(histogram(o, l, 4000)[1] / 4000.0, 0.982, 0.02);
  o.temperature = 4.0;  // p1 = 1 / (1 + e^-0.25) = 0.562
  EXPECT_NEAR(histogram(o, l, 4000)[1] / 4000.0, 0.562, 0.03);
}

TEST(Sampler, SeedsReproduce) {
  SamplingOptions o;
  o.seed = 99;
  std::vector<int32_t> a, b;
  Sampler s1(o), s2(o);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l1(100, 0.0f), l2(100, 0.0f);
    a.push_back(s1.pick(l1, {}, {}));
    b.push_back(s2.pick(l2, {}, {}));
  }
  EXPECT_EQ(a, b);
}

TEST(Sampler, PenaltiesFollowHfAndOpenAi) {
  SamplingOptions o;
  o.temperature = 0;
  o.repetition_penalty = 2.0;
  Sampler s(o);
  std::vector<float> l = {4.0f, 3.0f, -1.0f, 0.5f};
  const std::vector<int32_t> prompt = {0}, generated = {2};
  s.pick(l, prompt, generated);
  EXPECT_EQ(l, (std::vector<float>{2.0f, 3.0f, -2.0f, 0.5f}));  // positive ÷ 2, negative × 2
  o.repetition_penalty = 1.0;
  o.presence_penalty = 0.5;
  o.frequency_penalty = 0.25;
  Sampler s2(o);
  l = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> gen = {1, 1, 2};
  EXPECT_EQ(s2.pick(l, prompt, gen), 0);  // the prompt's token 0 is not penalized by these two
  EXPECT_EQ(l, (std::vector<float>{1.0f, 0.0f, 0.25f}));
}

TEST(Sampler, OptionsOutOfRangeAreRefused) {
  for (auto set : std::vector<void (*)(SamplingOptions&)>{
           [](SamplingOptions& o) { o.temperature = -1; }, [](SamplingOptions& o) { o.top_p = 0; },
           [](SamplingOptions& o) { o.top_p = 1.5; }, [](SamplingOptions& o) { o.top_k = -2; },
           [](SamplingOptions& o) { o.min_p = 2; }, [](SamplingOptions& o) { o.repetition_penalty = 0; },
           [](SamplingOptions& o) { o.presence_penalty = 3; }}) {
    SamplingOptions o;
    set(o);
    EXPECT_THROW(Sampler{o}, Error);
  }
}

TEST(Logprobs, LogSoftmaxOverTheWholeVocabulary) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, -inf, 0.5f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.5));
  const StepLogprobs s = step_logprobs(l, 0, 3);
  EXPECT_EQ(s.id, 0);
  EXPECT_NEAR(s.logprob, 1.0 - lse, 1e-12);
  ASSERT_EQ(s.top.size(), 3u);
  EXPECT_EQ(s.top[0].id, 1);  // a tie: the lower id first
  EXPECT_EQ(s.top[1].id, 2);
  EXPECT_EQ(s.top[2].id, 0);
  EXPECT_NEAR(s.top[0].logprob, 3.0 - lse, 1e-12);
  EXPECT_NEAR(s.top[2].logprob, s.logprob, 1e-12);
  EXPECT_EQ(step_logprobs(l, 3, 0).logprob, kLogprobFloor);  // −inf is floored to a JSON number
  EXPECT_TRUE(step_logprobs(l, 4, 0).top.empty());
  EXPECT_EQ(step_logprobs(l, 4, 99).top.size(), 5u);  // clamped to the vocabulary
  EXPECT_THROW(step_logprobs(l, 5, 1), Error);
}

TEST(CompletionText, HoldsBackUnfinishedCharacters) {
  CompletionText t;
  std::string out;
  t.update("ab\xEF\xBF\xBD");  // "ab" + an unfinished character (decoded as U+FFFD)
  out += t.take_ready(false);
  EXPECT_EQ(out, "ab");
  t.update("ab\xC3\xA9");  // it completes: é
  out += t.take_ready(false);
  EXPECT_EQ(out, "ab\xC3\xA9");
  t.update("ab\xC3\xA9\xEF\xBF\xBD");
  out += t.take_ready(true);  // at the end, what is there is released
  EXPECT_EQ(out, "ab\xC3\xA9\xEF\xBF\xBD");
}

TEST(CompletionText, CutsAtTheFirstStopStringAndHoldsPossibleStarts) {
  CompletionText t({"END", "##"});
  std::string out;
  EXPECT_FALSE(t.update("hello E"));
  out += t.take_ready(false);
  EXPECT_EQ(out, "hello ");  // "E" may start "END"
  EXPECT_FALSE(t.update("hello EN#"));
  out += t.take_ready(false);
  EXPECT_EQ(out, "hello EN");  // "EN#" cannot become "END"; "#" may start "##"
  EXPECT_TRUE(t.update("hello EN##x END"));
  out += t.take_ready(true);
  EXPECT_EQ(out, "hello EN");
  EXPECT_EQ(t.text(), "hello EN");
  EXPECT_TRUE(t.stopped());
}

// A stop string that arrives across several tokens, one character at a time: nothing of it, nor
// anything after it, is ever released; what came before it is.
TEST(CompletionText, AStopStringAcrossTokensIsNeverReleased) {
  CompletionText t({"</s>"});
  std::string out;
  const std::string full = "ab</s>cd";
  for (size_t n = 1; n <= full.size() && !t.stopped(); ++n) {
    t.update(full.substr(0, n));
    out += t.take_ready(false);
    EXPECT_EQ(out.find('<'), std::string::npos) << "after " << n << " bytes: " << out;
  }
  EXPECT_TRUE(t.stopped());
  out += t.take_ready(true);
  EXPECT_EQ(out, "ab");
  // A start that does not complete is released once it cannot become the stop string.
  CompletionText u({"</s>"});
  u.update("a</");
  EXPECT_EQ(u.take_ready(false), "a");
  u.update("a</x");
  EXPECT_EQ(u.take_ready(false), "</x");
}

TEST(CompletionText, NeverSplitsACharacterWhenHoldingBack) {
  CompletionText t({"\xC3\xA9x"});  // "éx"
  t.update("a\xC3\xA9");
  EXPECT_EQ(t.take_ready(false), "a");
  t.update("a\xC3\xA9y");
  EXPECT_EQ(t.take_ready(false), "\xC3\xA9y");
}

}  // namespace
}  // namespace stave
