// Continuous batching (src/engine/generation_scheduler.h): requests of different prompt lengths,
// budgets and sampling settings that join while others decode and leave when they finish get
// exactly the tokens, text and finish reason each gets generating alone (LanguageModel::generate: prefill, then decode_step),
// on the fixture releases in exact precision on the CPU; cancellation and a caller's failing
// callback end only their own request; the decode batch stays within its bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "engine/generation_scheduler.h"
#include "stave/language_model.h"
#include "test_util.h"

namespace stave {
namespace {

using OJson = nlohmann::ordered_json;

std::shared_ptr<LanguageModel> load(const std::string& variant, Precision p) {
  EngineOptions o;
  o.model = test::fixture("public/model-" + variant);
  o.precision = p;
  o.threads = 1;
  return LanguageModel::load(o);
}

struct Case {
  std::vector<int32_t> prompt;
  GenerationOptions options;
};

// The four reference chats' prompts (15 … 47 tokens) and two windows' prefixes (5 and 60), with
// different budgets; one stops on a stop token, one samples with its own seed, one has a stop
// string, one asks for logprobs.
std::vector<Case> cases(const std::string& variant, const LanguageModel& lm) {
  const OJson ref = OJson::parse(read_file(test::fixture("public/lm/lm-" + variant + ".json")));
  std::vector<Case> out;
  const int64_t budgets[] = {24, 5, 17, 9};
  for (size_t c = 0; c < 4; ++c) {
    Case k;
    k.prompt = ref["chats"][c]["prompt_ids"].get<std::vector<int32_t>>();
    k.options.sampling.temperature = 0.0;
    k.options.max_tokens = budgets[c];
    out.push_back(k);
  }
  const auto window = ref["perplexity"][0]["input_ids"].get<std::vector<int32_t>>();
  Case shortp{{window.begin(), window.begin() + 5}, {}};
  shortp.options.max_tokens = 12;
  shortp.options.sampling.temperature = 0.8;
  shortp.options.sampling.top_p = 0.95;
  shortp.options.sampling.seed = 3;
  out.push_back(shortp);
  Case longp{{window.begin(), window.begin() + 60}, {}};
  longp.options.max_tokens = 14;
  longp.options.sampling.temperature = 0.0;
  longp.options.logprobs = 2;
  out.push_back(longp);
  // The third greedy token of chat 1 as a stop token: that request leaves after 3 steps.
  const auto greedy1 = ref["chats"][1]["greedy_ids"].get<std::vector<int32_t>>();
  out[1].options.max_tokens = 24;
  out[1].options.stop_token_ids = {greedy1[2]};
  // A stop string inside chat 2's completion.
  const std::string full = lm.detokenize(ref["chats"][2]["greedy_ids"].get<std::vector<int32_t>>());
  out[2].options.stop = {full.substr(full.size() / 2, 2)};
  return out;
}

struct Outcome {
  Generation g;
  std::string streamed;
  size_t tokens_seen = 0, logprobs_seen = 0;
};

void expect_same(const Outcome& got, const Generation& alone, size_t i) {
  EXPECT_EQ(got.g.prompt_token_ids, alone.prompt_token_ids) << "request " << i;
  EXPECT_EQ(got.g.completion_token_ids, alone.completion_token_ids) << "request " << i;
  EXPECT_EQ(got.g.text, alone.text) << "request " << i;
  EXPECT_EQ(got.g.finish_reason, alone.finish_reason) << "request " << i;
  EXPECT_EQ(got.streamed, got.g.text) << "request " << i;
  EXPECT_EQ(got.tokens_seen, got.g.completion_token_ids.size()) << "request " << i;
  ASSERT_EQ(got.g.logprobs.size(), alone.logprobs.size()) << "request " << i;
  EXPECT_EQ(got.logprobs_seen, got.g.logprobs.size()) << "request " << i;
  // Log-probabilities within 1e-4: decode_batch's rows equal decode_step's up to the order of
  // the linear layers' sums over more rows (tests/test_decode_step.cpp's bound; measured ~1e-6
  // on the BF16 fixture, 0 on MXFP4) — the picked ids above are exact.
  for (size_t s = 0; s < alone.logprobs.size(); ++s) {
    EXPECT_EQ(got.g.logprobs[s].id, alone.logprobs[s].id);
    EXPECT_NEAR(got.g.logprobs[s].logprob, alone.logprobs[s].logprob, 1e-4) << "request " << i << " step " << s;
    ASSERT_EQ(got.g.logprobs[s].top.size(), alone.logprobs[s].top.size());
    for (size_t t = 0; t < alone.logprobs[s].top.size(); ++t)
      EXPECT_NEAR(got.g.logprobs[s].top[t].logprob, alone.logprobs[s].top[t].logprob, 1e-4);
  }
}

// Each request starts once the one before it has produced `lead` tokens, so requests join a
// batch that is mid-decode and leave it at different steps.
void check_join_leave_equals_alone(const std::string& variant, int64_t max_batch) {
  const auto lm = load(variant, Precision::kExact);
  const std::vector<Case> cs = cases(variant, *lm);
  std::vector<Generation> alone;
  for (const Case& c : cs) alone.push_back(lm->generate(c.prompt, c.options));
  EXPECT_EQ(alone[1].finish_reason, "stop");
  EXPECT_EQ(alone[1].completion_token_ids.size(), 3u);
  EXPECT_EQ(alone[2].finish_reason, "stop");

  std::mutex mu;
  int64_t widest = 0, steps = 0;
  SchedulerOptions so;
  so.max_batch = max_batch;
  so.on_step = [&](int64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    widest = std::max(widest, n);
    ++steps;
  };
  GenerationScheduler sched(lm, so);
  std::vector<Outcome> got(cs.size());
  std::vector<std::atomic<size_t>> progress(cs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i > 0) {  // wait until the previous request has produced 2 tokens (or finished)
      const auto t0 = std::chrono::steady_clock::now();
      while (progress[i - 1].load() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    threads.emplace_back([&, i] {
      GenerationOptions o = cs[i].options;
      o.on_token = [&, i](int32_t) {
        ++got[i].tokens_seen;
        progress[i].store(got[i].tokens_seen);
      };
      o.on_logprobs = [&, i](const StepLogprobs&) { ++got[i].logprobs_seen; };
      got[i].g = sched.generate(cs[i].prompt, o, [&, i](std::string_view p) { got[i].streamed += p; });
      progress[i].store(1000);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < cs.size(); ++i) expect_same(got[i], alone[i], i);
  std::cout << "[ scheduler " << variant << " ] " << steps << " decode steps, widest batch " << widest << "\n";
  EXPECT_GE(widest, 2) << "no step decoded two requests together";
  EXPECT_LE(widest, max_batch);
  EXPECT_EQ(sched.running(), 0);
  EXPECT_EQ(sched.waiting(), 0);
}

TEST(GenerationScheduler, JoinAndLeaveEqualsAloneBf16Exact) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  check_join_leave_equals_alone("bf16", 32);
}

// A bound of 3 below the 6 requests: later ones wait for a slot.
TEST(GenerationScheduler, JoinAndLeaveEqualsAloneMxfp4ExactBoundedBatch) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-mxfp4.json");
  check_join_leave_equals_alone("mxfp4", 3);
}

// All at once: requests submitted together are admitted together and step together.
TEST(GenerationScheduler, SimultaneousRequestsEqualAlone) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  const std::vector<Case> cs = cases("bf16", *lm);
  GenerationScheduler sched(lm);
  std::vector<Outcome> got(cs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cs.size(); ++i)
    threads.emplace_back([&, i] {
      GenerationOptions o = cs[i].options;
      o.on_token = [&, i](int32_t) { ++got[i].tokens_seen; };
      o.on_logprobs = [&, i](const StepLogprobs&) { ++got[i].logprobs_seen; };
      got[i].g = sched.generate(cs[i].prompt, o, [&, i](std::string_view p) { got[i].streamed += p; });
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < cs.size(); ++i) expect_same(got[i], lm->generate(cs[i].prompt, cs[i].options), i);
}

// A request whose client goes away (its cancel flag set after 3 tokens) ends with
// DecisionCancelled between steps; one whose callback throws gets that error; the request
// decoding beside them is unaffected.
TEST(GenerationScheduler, CancellationEndsOnlyItsRequest) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  const std::vector<Case> cs = cases("bf16", *lm);
  const Generation alone = lm->generate(cs[0].prompt, cs[0].options);
  GenerationScheduler sched(lm);
  std::atomic<bool> cancel{false};
  std::atomic<int> cancelled_tokens{0}, thrower_tokens{0};
  bool was_cancelled = false, threw = false;
  Generation other;
  std::thread a([&] {
    GenerationOptions o = cs[3].options;
    o.max_tokens = 24;
    o.cancel = &cancel;
    o.on_token = [&](int32_t) {
      if (++cancelled_tokens == 3) cancel.store(true);
    };
    try {
      sched.generate(cs[3].prompt, o);
    } catch (const DecisionCancelled&) {
      was_cancelled = true;
    }
  });
  std::thread b([&] {
    GenerationOptions o = cs[5].options;
    o.on_token = [&](int32_t) {
      if (++thrower_tokens == 2) throw std::runtime_error("the client's socket broke");
    };
    try {
      sched.generate(cs[5].prompt, o);
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "the client's socket broke";
    }
  });
  std::thread c([&] { other = sched.generate(cs[0].prompt, cs[0].options); });
  a.join();
  b.join();
  c.join();
  EXPECT_TRUE(was_cancelled);
  EXPECT_TRUE(threw);
  EXPECT_GE(cancelled_tokens.load(), 3);
  EXPECT_LT(cancelled_tokens.load(), 24);  // stopped well before its budget
  EXPECT_EQ(other.completion_token_ids, alone.completion_token_ids);
  EXPECT_EQ(other.text, alone.text);
  // A request cancelled before it starts never runs.
  std::atomic<bool> already{true};
  GenerationOptions o = cs[0].options;
  o.cancel = &already;
  EXPECT_THROW(sched.generate(cs[0].prompt, o), DecisionCancelled);
}

GenerationOptions budget(int64_t max_tokens) {
  GenerationOptions g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0.0;
  return g;
}

SchedulerOptions bound(int64_t max_batch, int64_t prefill_tokens) {
  SchedulerOptions o;
  o.max_batch = max_batch;
  o.prefill_tokens = prefill_tokens;
  return o;
}

TEST(GenerationScheduler, BadRequestsAndOptionsAreErrors) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  EXPECT_THROW(GenerationScheduler(lm, bound(0, 100)), Error);
  EXPECT_THROW(GenerationScheduler(lm, bound(4, 0)), Error);
  GenerationScheduler sched(lm);
  EXPECT_THROW(sched.generate({}, GenerationOptions{}), Error);
  EXPECT_THROW(sched.generate(std::vector<int32_t>{1, 2}, budget(-1)), Error);
  GenerationOptions lp;
  lp.logprobs = 99;
  EXPECT_THROW(sched.generate(std::vector<int32_t>{1, 2}, lp), Error);
  // An id outside the vocabulary fails its own prefill, reported to its caller.
  EXPECT_THROW(sched.generate(std::vector<int32_t>{1, static_cast<int32_t>(lm->vocab_size()) + 5}, GenerationOptions{}),
               Error);
  EXPECT_EQ(sched.generate(std::vector<int32_t>{1, 2}, budget(0)).completion_token_ids.size(), 0u);
  const Generation g = sched.generate(std::vector<int32_t>{1, 2}, budget(2));
  EXPECT_EQ(g.completion_token_ids.size(), 2u);
  // Ids only: the same ids, no text; stop strings need the text.
  GenerationOptions ids_only = budget(2);
  ids_only.detokenize = false;
  const Generation bare = sched.generate(std::vector<int32_t>{1, 2}, ids_only);
  EXPECT_EQ(bare.completion_token_ids, g.completion_token_ids);
  EXPECT_EQ(bare.text, "");
  ids_only.stop = {"x"};
  EXPECT_THROW(sched.generate(std::vector<int32_t>{1, 2}, ids_only), Error);
  EXPECT_THROW(lm->generate(std::vector<int32_t>{1, 2}, ids_only), Error);
}

}  // namespace
}  // namespace stave
