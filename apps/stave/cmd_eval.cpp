// stave eval: how far one model's decisions are from another's, and how often each is right.
//   stave eval --model A --against B REQUESTS...      agreement and |Δp| on plain requests
//   stave eval --model A [--against B] --data FILE.jsonl [--sample N --seed S] [--json]
//              [--report report.html] [--out results.jsonl]
//                                                     accuracy on labelled data, agreement, KL
#include <cstdio>
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

namespace stave::cli {
namespace {

struct EvalArgs {
  std::string model, against;
  std::string precision = "exact", against_precision = "exact";
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
};

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

int run_data(const EvalArgs& a, const Engine& model, const Engine* against, const DecideOptions& d) {
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
  if (a.json) std::cout << eval::summary_json(s) << "\n";
  else print_table(s, a);
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
  if (a.data.empty() == a.requests.empty())
    return print_error_json("give either --data FILE.jsonl or request files, not both and not neither");
  if (a.data.empty() && a.against.empty()) return print_error_json("comparing requests needs --against");
  if (a.data.empty() && (a.sample || !a.report.empty() || !a.out.empty()))
    return print_error_json("--sample, --report and --out work with --data");
  if (a.sample && *a.sample == 0) return print_error_json("--sample must be at least 1");
  DecideOptions d;
  d.max_length = a.max_length;
  auto candidate = Engine::load({.model = a.model, .precision = *p, .threads = a.threads});
  std::unique_ptr<Engine> baseline;
  if (!a.against.empty()) baseline = Engine::load({.model = a.against, .precision = *q, .threads = a.threads});
  if (a.data.empty()) return run_requests(a, *candidate, *baseline, d);
  return run_data(a, *candidate, baseline.get(), d);
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
                sub.add_option("--summary-json", a->summary_json, "with REQUESTS: also write the summary to this file");
                sub.add_flag("--per-request", a->per_request, "with REQUESTS: one table row per request");
                sub.add_option("requests", a->requests,
                               "request .json / .jsonl files, or folders of them or of case folders with request.json");
                return std::function<int()>([a]() { return run(*a); });
              },
              75}};

}  // namespace
}  // namespace stave::cli
