// stave eval: how far one model's decisions are from another's, and how often each is right.
//   stave eval --model A --against B REQUESTS...      agreement and |Δp| on plain requests
//   stave eval --model A [--against B] --data FILE.jsonl [--sample N --seed S] [--json]
//              [--report report.html] [--out results.jsonl]
//                                                     accuracy on labelled data, agreement, KL
//   stave eval --model A [--against B] --perplexity FILE.txt [--ctx 1024] [--windows 64]
//                                                     the card's perplexity of both (with --data or alone)
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "eval/compare_engines.h"
#include "eval/label_scoring.h"
#include "eval/labelled_data.h"
#include "eval/report_html.h"
#include "eval/run_labelled.h"
#include "stave/engine.h"
#include "stave/language_model.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {

struct EvalArgs {
  std::string model, against;
  std::string precision = "exact", against_precision = "exact";
  std::string device = "cpu", against_device;  // against_device empty: the same as device
  int threads = 0;
  int64_t max_length = 16384;
  std::vector<std::string> requests;
  std::string summary_json;
  bool per_request = false;
  // labelled data
  std::string data, report, out;
  std::optional<size_t> sample;
  uint64_t seed = 0;
  bool json = false;
  // perplexity (the card's protocol: tokenize, non-overlapping windows of ctx, the first `windows`)
  std::string perplexity;
  int64_t ctx = 1024;
  int64_t windows = 64;
};

std::string display_name(const std::string& model);

// The card's perplexity of one release on a text file: tokenized with that release's tokenizer,
// non-overlapping windows of `ctx` tokens, the first `windows` of them (as `stave perplexity`).
struct TextPerplexity {
  int64_t windows = 0, tokens = 0;
  double mean_nll = 0, ppl = 0;
};

TextPerplexity text_perplexity(const std::string& model, Precision precision, const std::string& device, int threads,
                               const std::string& text, const EvalArgs& a) {
  EngineOptions eo;
  eo.model = model;
  eo.precision = precision;
  eo.device = device;
  eo.threads = threads;
  const auto lm = LanguageModel::load(eo);
  const std::vector<int32_t> ids = lm->tokenize(text);
  const auto windows = LanguageModel::split_windows(ids, a.ctx, a.windows);
  if (windows.empty())
    throw Error(ErrorKind::kInvalidRequest, a.perplexity + " has " + std::to_string(ids.size()) +
                                                " tokens with " + model + "'s tokenizer: not one window of --ctx " +
                                                std::to_string(a.ctx));
  std::fprintf(stderr, "eval: perplexity of %s on %zu windows of %lld tokens\n", model.c_str(), windows.size(),
               static_cast<long long>(a.ctx));
  const Perplexity r = lm->perplexity(windows);
  TextPerplexity out{.windows = static_cast<int64_t>(windows.size()), .mean_nll = r.mean_nll, .ppl = r.ppl};
  for (const auto& w : windows) out.tokens += static_cast<int64_t>(w.size());
  return out;
}

// {"perplexity": {...}} for the summary: each model's perplexity and the relative change of
// the model's against the baseline's ((model − against) / against), as the card reports it.
nlohmann::ordered_json perplexity_json(const EvalArgs& a, const TextPerplexity& m, const TextPerplexity* b) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
  nlohmann::ordered_json j;
  j["text"] = std::filesystem::path(a.perplexity).filename().string();
  j["ctx"] = a.ctx;
  j["windows"] = m.windows;
  j["tokens"] = m.tokens;
  j["model"] = {{"ppl", num(m.ppl)}, {"mean_nll", num(m.mean_nll)}};
  if (b) {
    j["against"] = {{"ppl", num(b->ppl)}, {"mean_nll", num(b->mean_nll)}};
    j["relative_change"] = num((m.ppl - b->ppl) / b->ppl);
  }
  return j;
}

void print_perplexity_table(const EvalArgs& a, const TextPerplexity& m, const TextPerplexity* b) {
  if (b) {
    std::cout << fmt::format("\n| perplexity ({} windows of {}) | {} ({}) | {} ({}) | change |\n|---|---:|---:|---:|\n",
                             m.windows, a.ctx, display_name(a.against), a.against_precision, display_name(a.model),
                             a.precision);
    std::cout << fmt::format("| {} | {:.4g} | {:.4g} | {:+.2f}% |\n", display_name(a.perplexity), b->ppl, m.ppl,
                             (m.ppl - b->ppl) / b->ppl * 100);
  } else {
    std::cout << fmt::format("\n| perplexity ({} windows of {}) | {} ({}) |\n|---|---:|\n", m.windows, a.ctx,
                             display_name(a.model), a.precision);
    std::cout << fmt::format("| {} | {:.4g} |\n", display_name(a.perplexity), m.ppl);
  }
}

int run_requests(const EvalArgs& a, const Engine& candidate, const Engine& baseline, const DecideOptions& d) {
  const auto requests = eval::load_requests(a.requests);
  std::vector<eval::RequestComparison> rows;
  for (const auto& r : requests) {
    rows.push_back(eval::compare_request(candidate, baseline, r, d));
    std::fprintf(stderr, "\r%zu/%zu requests", rows.size(), requests.size());
  }
  std::fprintf(stderr, "\n");
  const eval::ComparisonSummary s = eval::summarize(rows);
  nlohmann::json j = {{"model", a.model},
                      {"against", a.against},
                      {"precision", a.precision},
                      {"against_precision", a.against_precision},
                      {"requests", s.requests},
                      {"refused", s.refused},
                      {"error_disagreements", s.error_disagreements},
                      {"questions", s.questions},
                      {"top_agreements", s.top_agreements},
                      {"max_abs_dp", s.max_abs_dp},
                      {"mean_max_abs_dp", s.mean_max_abs_dp},
                      {"mean_abs_dlogit", s.mean_abs_dlogit},
                      {"max_abs_dlogit", s.max_abs_dlogit}};
  if (a.json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << fmt::format("| model | against | requests | refused | questions | top agree | max |Δp| | mean max |Δp| "
                             "| mean |Δlogit| | max |Δlogit| |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::cout << fmt::format("| {} ({}) | {} ({}) | {} | {} | {} | {:.4f} | {:.5f} | {:.5f} | {:.5f} | {:.5f} |\n",
                             a.model, a.precision, a.against, a.against_precision, s.requests, s.refused, s.questions,
                             s.questions ? static_cast<double>(s.top_agreements) / s.questions : 1.0, s.max_abs_dp,
                             s.mean_max_abs_dp, s.mean_abs_dlogit, s.max_abs_dlogit);
  }
  if (a.per_request && !a.json) {
    std::cout << "\n| request | top agree | max |Δp| | mean |Δlogit| |\n|---|---:|---:|---:|\n";
    for (const auto& r : rows) {
      if (r.error)
        std::cout << fmt::format("| {} | refused{} | | |\n", r.name, r.errors_agree ? "" : " (by one side only)");
      else
        std::cout << fmt::format("| {} | {}/{} | {:.5f} | {:.5f} |\n", r.name, r.top_agreements, r.questions,
                                 r.max_abs_dp, r.mean_abs_dlogit);
    }
  }
  if (!a.summary_json.empty()) std::ofstream(a.summary_json) << j.dump(2) << "\n";
  // A request that one side answers and the other refuses is a real disagreement.
  return s.error_disagreements ? 1 : 0;
}

std::string display_name(const std::string& model) {
  std::string s = model;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const std::string base = std::filesystem::path(s).filename().string();
  return base.empty() ? model : base;
}

void print_table(const eval::EvalSummary& s, const EvalArgs& a) {
  auto pct = [](std::optional<double> v) { return v ? fmt::format("{:.1f}%", *v * 100) : std::string("-"); };
  const std::string task = display_name(a.data);
  if (s.has_against) {
    std::cout << fmt::format("| task | records | {} ({}) accuracy | {} ({}) accuracy | top-1 agreement | "
                             "mean KL | max |Δp| |\n|---|---:|---:|---:|---:|---:|---:|\n",
                             display_name(a.against), a.against_precision, display_name(a.model), a.precision);
    std::cout << fmt::format("| {} | {} | {} | {} | {:.1f}% | {:.4g} | {:.4f} |\n", task, s.records,
                             pct(s.against_accuracy()), pct(s.model_accuracy()), s.top1_agreement() * 100, s.mean_kl(),
                             s.max_abs_dp);
  } else {
    std::cout << fmt::format("| task | records | {} ({}) accuracy |\n|---|---:|---:|\n", display_name(a.model),
                             a.precision);
    std::cout << fmt::format("| {} | {} | {} |\n", task, s.records, pct(s.model_accuracy()));
  }
}

int run_data(const EvalArgs& a, const Engine& model, const Engine* against, const DecideOptions& d,
             const std::function<void(nlohmann::ordered_json*)>& perplexity) {
  const auto records = eval::read_labelled_jsonl(a.data);
  if (records.empty()) return print_error_json("--data " + a.data + " holds no records");
  eval::LabelledRunOptions o;
  o.decide = d;
  o.sample = a.sample;
  o.seed = a.seed;
  o.out_path = a.out;
  o.run_header = nlohmann::ordered_json{{"model", a.model},
                                        {"against", a.against},
                                        {"precision", a.precision},
                                        {"against_precision", a.against_precision},
                                        {"max_length", a.max_length}}
                     .dump();
  const auto results = eval::run_labelled(model, against, records, o);
  const eval::EvalSummary s = eval::summarize_records(results, against != nullptr);
  if (s.bad_records) std::fprintf(stderr, "eval: %lld bad records (listed above by line)\n", static_cast<long long>(s.bad_records));
  if (a.json) {
    auto j = nlohmann::ordered_json::parse(eval::summary_json(s));
    perplexity(&j);
    std::cout << j.dump() << "\n";
  } else {
    print_table(s, a);
    perplexity(nullptr);
  }
  if (!a.report.empty()) {
    eval::ReportInfo info{.task = display_name(a.data),
                          .model = display_name(a.model),
                          .against = display_name(a.against),
                          .precision = a.precision,
                          .against_precision = a.against_precision,
                          .sampled_of = records.size()};
    std::ofstream f(a.report, std::ios::binary);
    f << eval::render_report_html(results, s, info);
    if (!f) return print_error_json("cannot write --report " + a.report);
  }
  return s.records ? 0 : 1;
}

int run(const EvalArgs& a) {
  auto p = parse_precision(a.precision);
  auto q = parse_precision(a.against_precision);
  if (!p || !q) return print_error_json("--precision and --against-precision must be exact or fast");
  const std::string against_device = a.against_device.empty() ? a.device : a.against_device;
  if (a.data.empty() && a.requests.empty() && a.perplexity.empty())
    return print_error_json("give --data FILE.jsonl, --perplexity FILE.txt, or request files");
  if (!a.requests.empty() && (!a.data.empty() || !a.perplexity.empty()))
    return print_error_json("request files go alone: not with --data or --perplexity");
  if (!a.requests.empty() && a.against.empty()) return print_error_json("comparing requests needs --against");
  if (a.data.empty() && (a.sample || !a.report.empty() || !a.out.empty()))
    return print_error_json("--sample, --report and --out work with --data");
  if (a.sample && *a.sample == 0) return print_error_json("--sample must be at least 1");
  // Perplexity first (it reads the file before any model is loaded, so a bad path fails fast).
  std::optional<TextPerplexity> ppl_model, ppl_against;
  if (!a.perplexity.empty()) {
    const std::string text = read_file(a.perplexity);
    ppl_model = text_perplexity(a.model, *p, a.device, a.threads, text, a);
    if (!a.against.empty()) ppl_against = text_perplexity(a.against, *q, against_device, a.threads, text, a);
  }
  const TextPerplexity* against_ppl = ppl_against ? &*ppl_against : nullptr;
  auto add_perplexity = [&](nlohmann::ordered_json* j) {
    if (!ppl_model) return;
    if (j) (*j)["perplexity"] = perplexity_json(a, *ppl_model, against_ppl);
    else print_perplexity_table(a, *ppl_model, against_ppl);
  };
  if (a.data.empty() && a.requests.empty()) {  // perplexity alone
    if (a.json) {
      nlohmann::ordered_json j;
      add_perplexity(&j);
      std::cout << j.dump() << "\n";
    } else {
      add_perplexity(nullptr);
    }
    return 0;
  }
  DecideOptions d;
  d.max_length = a.max_length;
  auto engine_options = [&](const std::string& model, Precision precision, const std::string& device) {
    EngineOptions o;
    o.model = model;
    o.precision = precision;
    o.threads = a.threads;
    o.device = device;
    return o;
  };
  auto candidate = Engine::load(engine_options(a.model, *p, a.device));
  std::unique_ptr<Engine> baseline;
  if (!a.against.empty()) baseline = Engine::load(engine_options(a.against, *q, against_device));
  if (a.data.empty()) return run_requests(a, *candidate, *baseline, d);
  return run_data(a, *candidate, baseline.get(), d, add_perplexity);
}

Register reg{{"eval", "Accuracy on labelled data, and how far a model's decisions are from another's (agreement, KL, |Δp|)",
              [](CLI::App& sub) {
                auto a = std::make_shared<EvalArgs>();
                sub.add_option("--model", a->model, "the model under test (folder or repo id)")->required();
                sub.add_option("--against", a->against, "the baseline model (e.g. the BF16 release)");
                sub.add_option("--precision", a->precision, "exact or fast, for --model")->capture_default_str();
                sub.add_option("--against-precision", a->against_precision, "exact or fast, for --against")
                    ->capture_default_str();
                sub.add_option("--threads", a->threads, "CPU threads (0: all)")->check(in_range(0, 4096));
                sub.add_option("--device", a->device, "where --model's backbone runs: cpu, or cuda (builds with CUDA)")
                    ->capture_default_str();
                sub.add_option("--against-device", a->against_device, "where --against's runs (default: --device)");
                sub.add_option("--max-length", a->max_length, "token budget per request")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--data", a->data,
                               "labelled JSONL: {\"request\": {...}, \"labels\": {question id: option id}} per line");
                sub.add_option("--sample", a->sample, "evaluate a deterministic sample of N records (see --seed)")
                    ->check(in_range(1));
                sub.add_option("--seed", a->seed, "seed of the --sample draw (std::mt19937_64)")->capture_default_str();
                sub.add_flag("--json", a->json, "print the summary as one JSON object instead of the table");
                sub.add_option("--report", a->report, "write a self-contained HTML report (with --data)");
                sub.add_option("--out", a->out,
                               "append one JSON line per record (with --data); a rerun skips the records already there");
                sub.add_option("--perplexity", a->perplexity,
                               "also (or only) the perplexity of both models on this text file, as the card measures it");
                sub.add_option("--ctx", a->ctx, "tokens per perplexity window")->capture_default_str()->check(in_range(2, 1 << 20));
                sub.add_option("--windows", a->windows, "perplexity windows scored at most")
                    ->capture_default_str()
                    ->check(in_range(1, 1 << 20));
                sub.add_option("--summary-json", a->summary_json, "with REQUESTS: also write the summary to this file");
                sub.add_flag("--per-request", a->per_request, "with REQUESTS: one table row per request");
                sub.add_option("requests", a->requests,
                               "request .json / .jsonl files, or folders of them or of case folders with request.json");
                return std::function<int()>([a]() { return run(*a); });
              },
              75}};

}  // namespace
}  // namespace stave::cli
