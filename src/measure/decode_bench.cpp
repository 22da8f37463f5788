#include "measure/decode_bench.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "engine/generation_scheduler.h"
#include "stave/errors.h"
#include "stave/language_model.h"

namespace stave::measure {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void check(const DecodeBenchOptions& o) {
  if (o.prompt_tokens.empty()) throw Error(ErrorKind::kInvalidRequest, "no prompt lengths to run");
  for (int64_t n : o.prompt_tokens)
    if (n < 1) throw Error(ErrorKind::kInvalidRequest, fmt::format("a prompt length must be at least 1, got {}", n));
  if (o.new_tokens < 2)
    throw Error(ErrorKind::kInvalidRequest, fmt::format("new tokens must be at least 2 (a decode rate needs two), got {}", o.new_tokens));
  if (o.batches.empty()) throw Error(ErrorKind::kInvalidRequest, "no batch sizes to run");
  for (int64_t b : o.batches)
    if (b < 1 || b > 4096) throw Error(ErrorKind::kInvalidRequest, fmt::format("a batch size must be 1 … 4096, got {}", b));
  if (o.repeat < 1) throw Error(ErrorKind::kInvalidRequest, "repeat must be at least 1");
  if (o.warmup < 0) throw Error(ErrorKind::kInvalidRequest, "warmup must not be negative");
}

// Ids the tokenizer can decode (the lm_head's vocabulary may be padded past the tokenizer's),
// drawn uniformly from the ordinary vocabulary below the first special token (<|endoftext|>).
std::vector<int32_t> random_prompt(const LanguageModel& lm, int64_t n, std::mt19937_64& rng) {
  const std::vector<int32_t> probe = lm.tokenize("<|endoftext|>");
  const int32_t limit = probe.size() == 1 ? probe[0] : static_cast<int32_t>(lm.vocab_size());
  std::uniform_int_distribution<int32_t> pick(0, limit - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

GenerationOptions bench_options(int64_t new_tokens) {
  GenerationOptions g;
  g.max_tokens = new_tokens;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  g.detokenize = false;  // the model's speed alone (random weights may pick ids past the tokenizer's)
  return g;
}

struct Run {
  double ttft_ms = 0;
  std::vector<double> ttfts_ms;  // a batch: each request's
  double tokens_per_s = 0;
  std::vector<double> gaps_ms;
};

Run time_one(const LanguageModel& lm, const std::vector<int32_t>& prompt, int64_t new_tokens) {
  GenerationOptions g = bench_options(new_tokens);
  std::vector<Clock::time_point> at;
  at.reserve(static_cast<size_t>(new_tokens));
  g.on_token = [&](int32_t) { at.push_back(Clock::now()); };
  const auto t0 = Clock::now();
  lm.generate(prompt, g);
  if (static_cast<int64_t>(at.size()) != new_tokens)
    throw Error(ErrorKind::kInternal, fmt::format("the generation stopped after {} of {} tokens", at.size(), new_tokens));
  Run r;
  r.ttft_ms = ms_between(t0, at.front());
  r.ttfts_ms = {r.ttft_ms};
  r.tokens_per_s = static_cast<double>(new_tokens - 1) / (ms_between(at.front(), at.back()) / 1000.0);
  for (size_t i = 1; i < at.size(); ++i) r.gaps_ms.push_back(ms_between(at[i - 1], at[i]));
  return r;
}


// B requests submitted together to `sched`, each on its own thread as server workers do.
Run time_batch(GenerationScheduler& sched, const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens) {
  const size_t B = prompts.size();
  std::vector<std::vector<Clock::time_point>> at(B);
  std::vector<std::exception_ptr> errors(B);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (size_t b = 0; b < B; ++b)
    threads.emplace_back([&, b] {
      GenerationOptions g = bench_options(new_tokens);
      at[b].reserve(static_cast<size_t>(new_tokens));
      g.on_token = [&, b](int32_t) { at[b].push_back(Clock::now()); };
      try {
        sched.generate(prompts[b], g);
      } catch (...) {
        errors[b] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  Run r;
  Clock::time_point first = at[0].front(), last = at[0].back();
  for (size_t b = 0; b < B; ++b) {
    if (static_cast<int64_t>(at[b].size()) != new_tokens)
      throw Error(ErrorKind::kInternal, fmt::format("a generation stopped after {} of {} tokens", at[b].size(), new_tokens));
    first = std::min(first, at[b].front());
    last = std::max(last, at[b].back());
    r.ttfts_ms.push_back(ms_between(t0, at[b].front()));
    for (size_t i = 1; i < at[b].size(); ++i) r.gaps_ms.push_back(ms_between(at[b][i - 1], at[b][i]));
  }
  r.ttft_ms = r.ttfts_ms.front();
  r.tokens_per_s = static_cast<double>(B) * static_cast<double>(new_tokens - 1) / (ms_between(first, last) / 1000.0);
  return r;
}

}  // namespace

DecodeReport run_decode_bench(const DecodeBenchOptions& o) {
  check(o);
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  EngineOptions eo;
  eo.model = o.model;
  eo.precision = o.precision;
  eo.threads = o.threads;
  eo.device = o.device;
  eo.fp8_cache_gib = o.fp8_cache_gib;
  const auto t0 = Clock::now();
  const std::shared_ptr<const LanguageModel> lm = LanguageModel::load(eo);
  DecodeReport rep;
  rep.load_ms = ms_between(t0, Clock::now());
  rep.model = o.model;
  rep.precision = to_string(o.precision);
  rep.device = o.device;
  rep.threads = o.threads;
  rep.vocab = lm->vocab_size();
  log(fmt::format("loaded in {:.0f} ms", rep.load_ms));
  std::mt19937_64 rng(o.seed);
  for (int64_t n : o.prompt_tokens)
    for (int64_t batch : o.batches) {
      std::vector<std::vector<int32_t>> prompts;
      for (int64_t b = 0; b < batch; ++b) prompts.push_back(random_prompt(*lm, n, rng));
      std::unique_ptr<GenerationScheduler> sched;
      if (batch > 1) {
        SchedulerOptions so;
        so.max_batch = batch;
        sched = std::make_unique<GenerationScheduler>(lm, std::move(so));
      }
      auto once = [&] { return batch == 1 ? time_one(*lm, prompts[0], o.new_tokens) : time_batch(*sched, prompts, o.new_tokens); };
      for (int i = 0; i < o.warmup; ++i) once();
      std::vector<double> ttft, tps, gaps;
      for (int i = 0; i < o.repeat; ++i) {
        Run r = once();
        ttft.insert(ttft.end(), r.ttfts_ms.begin(), r.ttfts_ms.end());
        tps.push_back(r.tokens_per_s);
        gaps.insert(gaps.end(), r.gaps_ms.begin(), r.gaps_ms.end());
        log(fmt::format("prompt {} batch {} run {}: ttft {:.1f} ms, decode {:.2f} tok/s", n, batch, i + 1, r.ttft_ms,
                        r.tokens_per_s));
      }
      DecodeLengthResult x;
      x.prompt_tokens = n;
      x.batch = batch;
      x.new_tokens = o.new_tokens;
      x.repeat = o.repeat;
      x.ttft_ms = summarize(ttft);
      x.decode_tokens_per_s = summarize(tps);
      x.inter_token_ms = summarize(gaps);
      rep.results.push_back(x);
    }
  return rep;
}

std::string markdown_table(const DecodeReport& r) {
  std::string out = fmt::format("model {} · {} · {} · threads {} · load {:.0f} ms · greedy, eos ignored; batch > 1: "
                                "that many requests through the continuous-batching scheduler, decode tok/s of all of them\n\n",
                                r.model, r.device, r.precision, r.threads == 0 ? std::string("all") : std::to_string(r.threads),
                                r.load_ms);
  out += "| prompt tokens | new tokens | runs | batch | TTFT ms p50 | TTFT ms min | decode tok/s p50 | decode tok/s max | ITL ms p50 | ITL ms p90 |\n";
  out += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const DecodeLengthResult& x : r.results)
    out += fmt::format("| {} | {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", x.prompt_tokens,
                       x.new_tokens, x.repeat, x.batch, x.ttft_ms.p50, x.ttft_ms.min, x.decode_tokens_per_s.p50,
                       x.decode_tokens_per_s.max, x.inter_token_ms.p50, x.inter_token_ms.p90);
  return out;
}

nlohmann::ordered_json to_json(const DecodeReport& r) {
  auto summary = [](const Summary& s) {
    return nlohmann::ordered_json{{"n", s.n},     {"min", s.min}, {"max", s.max}, {"mean", s.mean},
                                  {"stddev", s.stddev}, {"p50", s.p50}, {"p90", s.p90}};
  };
  nlohmann::ordered_json j = {{"model", r.model},   {"device", r.device}, {"precision", r.precision},
                              {"threads", r.threads}, {"vocab", r.vocab},  {"load_ms", r.load_ms}};
  j["results"] = nlohmann::ordered_json::array();
  for (const DecodeLengthResult& x : r.results)
    j["results"].push_back({{"prompt_tokens", x.prompt_tokens},
                            {"batch", x.batch},
                            {"new_tokens", x.new_tokens},
                            {"repeat", x.repeat},
                            {"ttft_ms", summary(x.ttft_ms)},
                            {"decode_tokens_per_s", summary(x.decode_tokens_per_s)},
                            {"inter_token_ms", summary(x.inter_token_ms)}});
  return j;
}

}  // namespace stave::measure
