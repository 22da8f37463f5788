// Continuous batching (src/engine/generation_scheduler.h): requests of different prompt lengths,
// budgets and sampling settings that join while others decode and leave when they finish get
// exactly the tokens, text and finish reason each gets generating alone (LanguageModel::generate: prefill, then decode_step),
// on the fixture releases in exact precision on the CPU — requests admitted in the same iteration
// are prefilled in one packed pass (counted through SchedulerOptions::on_prefill); a request
// the backbone refuses fails alone; cancellation and a caller's failing callback end only their
// own request; the decode batch and the prefill tokens per iteration stay within their bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
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

struct Outcome {
  Generation g;
  std::string streamed;
  size_t tokens_seen = 0, logprobs_seen = 0;
};

constexpr double kLogprobTol = 2e-3;

void expect_same(const Outcome& got, const Generation& alone, size_t i) {
  EXPECT_EQ(got.g.prompt_token_ids, alone.prompt_token_ids) << "request " << i;
  EXPECT_EQ(got.g.completion_token_ids, alone.completion_token_ids) << "request " << i;
  EXPECT_EQ(got.g.text, alone.text) << "request " << i;
  EXPECT_EQ(got.g.finish_reason, alone.finish_reason) << "request " << i;
  EXPECT_EQ(got.streamed, got.g.text) << "request " << i;
  EXPECT_EQ(got.tokens_seen, got.g.completion_token_ids.size()) << "request " << i;
  ASSERT_EQ(got.g.logprobs.size(), alone.logprobs.size()) << "request " << i;
  EXPECT_EQ(got.logprobs_seen, got.g.logprobs.size()) << "request " << i;
  // Log-probabilities within the fixtures' exact-precision tolerance per token (2e-3 on the
  // NLL, tests/test_language_model.cpp): decode_batch's rows equal decode_step's up to the order
  // of the linear layers' sums over more rows (measured ~1e-6 on the BF16 fixture, 0 on MXFP4),
  // and a packed prefill's states equal a prefill alone's up to the same (2e-5 on BF16,
  // tests/test_decode_step.cpp), which the BF16 fixture's GDN heads amplify over the decode
  // steps that follow: measured up to 1.8e-4 (60-token prompt packed with three others, 4th
  // step). The picked ids above are exact.
  for (size_t s = 0; s < alone.logprobs.size(); ++s) {
    EXPECT_EQ(got.g.logprobs[s].id, alone.logprobs[s].id);
    EXPECT_NEAR(got.g.logprobs[s].logprob, alone.logprobs[s].logprob, kLogprobTol) << "request " << i << " step " << s;
    ASSERT_EQ(got.g.logprobs[s].top.size(), alone.logprobs[s].top.size());
    for (size_t t = 0; t < alone.logprobs[s].top.size(); ++t)
      EXPECT_NEAR(got.g.logprobs[s].top[t].logprob, alone.logprobs[s].top[t].logprob, kLogprobTol)
          << "request " << i << " step " << s << " top " << t;
  }
}

// Holds the loop in a decode step until `want` requests wait (armed by the test just before it
// submits them), so that they are admitted in the same iteration: one packed prefill. The hook
// blocks only in these tests; it gives up after 20 s.
// The test arms it (arm(n)), which returns once the loop is held in a step — so none of the
// n requests the test then submits can be admitted before all n wait.
struct AdmitTogether {
  std::atomic<int64_t> want{0};
  std::atomic<bool> held{false};
  std::atomic<GenerationScheduler*> sched{nullptr};
  static bool until(const std::function<bool()>& done) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!done()) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  void arm(int64_t n) {
    held.store(false);
    want.store(n);
    EXPECT_TRUE(until([&] { return held.load(); })) << "the loop did not step";
  }
  void on_step() {
    const int64_t w = want.load();
    if (w <= 0) return;
    held.store(true);
    until([&] { return sched.load()->waiting() >= w; });
    want.store(0);
  }
};

// What the prefills did: passes, packed passes, the widest, the most tokens in a packed one.
struct PrefillLog {
  std::mutex mu;
  int64_t passes = 0, packed = 0, widest = 0, packed_tokens = 0;
  void on_prefill(int64_t sequences, int64_t tokens) {
    std::lock_guard<std::mutex> lock(mu);
    ++passes;
    if (sequences > 1) {
      ++packed;
      packed_tokens = std::max(packed_tokens, tokens);
    }
    widest = std::max(widest, sequences);
  }
};

// Requests start in groups ({0}, {1, 2}, {3, 4, 5}), each group once the first request of the
// group before it has produced 2 tokens: they join a batch that is mid-decode, the requests of a
// group are admitted together (one packed prefill, as far as max_batch leaves room), and they
// leave at different steps.
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
  AdmitTogether together;
  PrefillLog prefills;
  SchedulerOptions so;
  so.max_batch = max_batch;
  so.on_step = [&](int64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu);
      widest = std::max(widest, n);
      ++steps;
    }
    together.on_step();
  };
  so.on_prefill = [&](int64_t n, int64_t tokens) { prefills.on_prefill(n, tokens); };
  GenerationScheduler sched(lm, so);
  together.sched = &sched;
  std::vector<Outcome> got(cs.size());
  std::vector<std::atomic<size_t>> progress(cs.size());
  std::vector<std::thread> threads;
  const std::vector<std::vector<size_t>> groups{{0}, {1, 2}, {3, 4, 5}};
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g > 0) {  // wait until the previous group's first request has produced 2 tokens (or finished)
      const size_t lead = groups[g - 1][0];
      const auto t0 = std::chrono::steady_clock::now();
      while (progress[lead].load() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (groups[g].size() > 1) together.arm(static_cast<int64_t>(groups[g].size()));
    for (size_t i : groups[g])
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
  std::cout << "[ scheduler " << variant << " ] " << steps << " decode steps, widest batch " << widest << "; "
            << prefills.passes << " prefill passes, " << prefills.packed << " packed, widest " << prefills.widest
            << "\n";
  EXPECT_GE(widest, 2) << "no step decoded two requests together";
  EXPECT_LE(widest, max_batch);
  // Group {1, 2} joins while request 0 decodes: both fit any bound ≥ 3 and go in one pass.
  EXPECT_GE(prefills.packed, 1) << "no packed prefill";
  EXPECT_GE(prefills.widest, 2);
  EXPECT_LE(prefills.widest, max_batch);
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

// Runs cs[0] and, once it decodes, the other cases submitted together (admitted in one
// iteration, see AdmitTogether); returns each one's outcome. `extra` requests (prompts with the
// first case's options) are submitted with the group and their errors collected.
struct GroupRun {
  std::vector<Outcome> got;
  std::vector<std::exception_ptr> extra_errors;
};
GroupRun run_group(const std::shared_ptr<LanguageModel>& lm, const std::vector<Case>& cs, SchedulerOptions so,
                   PrefillLog& prefills, const std::vector<std::vector<int32_t>>& extra = {}) {
  AdmitTogether together;
  so.on_step = [&](int64_t) { together.on_step(); };
  so.on_prefill = [&](int64_t n, int64_t tokens) { prefills.on_prefill(n, tokens); };
  GenerationScheduler sched(lm, so);
  together.sched = &sched;
  GroupRun run;
  run.got.resize(cs.size());
  run.extra_errors.resize(extra.size());
  std::atomic<size_t> first_tokens{0};
  auto submit = [&](size_t i) {
    GenerationOptions o = cs[i].options;
    o.on_token = [&, i](int32_t) {
      ++run.got[i].tokens_seen;
      if (i == 0) ++first_tokens;
    };
    o.on_logprobs = [&, i](const StepLogprobs&) { ++run.got[i].logprobs_seen; };
    run.got[i].g = sched.generate(cs[i].prompt, o, [&, i](std::string_view p) { run.got[i].streamed += p; });
  };
  std::vector<std::thread> threads;
  threads.emplace_back(submit, 0);
  const auto t0 = std::chrono::steady_clock::now();
  while (first_tokens.load() < 1 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  together.arm(static_cast<int64_t>(cs.size() - 1 + extra.size()));
  for (size_t i = 1; i < cs.size(); ++i) threads.emplace_back(submit, i);
  for (size_t e = 0; e < extra.size(); ++e)
    threads.emplace_back([&, e] {
      try {
        sched.generate(extra[e], cs[0].options);
      } catch (...) {
        run.extra_errors[e] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(sched.running(), 0);
  EXPECT_EQ(sched.waiting(), 0);
  return run;
}

// Requests submitted together are admitted together: one packed prefill of all five (while
// request 0 decodes), then they step together; each gets what it gets alone.
TEST(GenerationScheduler, SimultaneousRequestsEqualAlone) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  std::vector<Case> cs = cases("bf16", *lm);
  cs[0].options.max_tokens = 24;
  PrefillLog prefills;
  const GroupRun run = run_group(lm, cs, SchedulerOptions{}, prefills);
  for (size_t i = 0; i < cs.size(); ++i) expect_same(run.got[i], lm->generate(cs[i].prompt, cs[i].options), i);
  EXPECT_EQ(prefills.passes, 2);  // request 0 alone, then the other five in one pass
  EXPECT_EQ(prefills.packed, 1);
  EXPECT_EQ(prefills.widest, static_cast<int64_t>(cs.size() - 1));
}

// A request the backbone refuses (an id outside the vocabulary; one past the context) admitted
// with others fails alone, before the packed pass: the others are prefilled together and get
// what they get alone.
TEST(GenerationScheduler, RefusedRequestFailsAloneInAPackedAdmission) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  std::vector<Case> cs = cases("bf16", *lm);
  cs.resize(4);
  cs[0].options.max_tokens = 24;
  const std::vector<std::vector<int32_t>> bad{{1, 2, static_cast<int32_t>(lm->vocab_size()) + 5}};
  PrefillLog prefills;
  const GroupRun run = run_group(lm, cs, SchedulerOptions{}, prefills, bad);
  ASSERT_TRUE(run.extra_errors[0]);
  try {
    std::rethrow_exception(run.extra_errors[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  for (size_t i = 0; i < cs.size(); ++i) expect_same(run.got[i], lm->generate(cs[i].prompt, cs[i].options), i);
  EXPECT_EQ(prefills.packed, 1);
  EXPECT_EQ(prefills.widest, 3);  // requests 1 … 3; the refused one never ran
}

// The admission bound: at most prefill_tokens prompt tokens per iteration (past the first
// request), so a group of four 5-token prompts under a bound of 10 goes in packed pairs.
TEST(GenerationScheduler, PrefillTokensBoundPackedPasses) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  const auto lm = load("bf16", Precision::kExact);
  const std::vector<Case> all = cases("bf16", *lm);
  std::vector<Case> cs{all[0]};
  cs[0].options.max_tokens = 24;
  const OJson ref = OJson::parse(read_file(test::fixture("public/lm/lm-bf16.json")));
  const auto window = ref["perplexity"][1]["input_ids"].get<std::vector<int32_t>>();
  for (size_t k = 0; k < 4; ++k) {
    Case c;
    c.prompt.assign(window.begin() + 5 * k, window.begin() + 5 * k + 5);
    c.options = budget(4);
    cs.push_back(c);
  }
  PrefillLog prefills;
  const GroupRun run = run_group(lm, cs, bound(32, 10), prefills);
  for (size_t i = 0; i < cs.size(); ++i) expect_same(run.got[i], lm->generate(cs[i].prompt, cs[i].options), i);
  EXPECT_EQ(prefills.passes, 3);  // request 0, then two pairs
  EXPECT_EQ(prefills.packed, 2);
  EXPECT_EQ(prefills.widest, 2);
  EXPECT_EQ(prefills.packed_tokens, 10);
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
