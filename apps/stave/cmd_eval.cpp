// stave eval --model A --against B REQUESTS...: how far A's decisions are from B's (a quantized
// release against its BF16 source, with or without AWQ; fast precision against exact).
#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "eval/compare_engines.h"
#include "stave/engine.h"

namespace stave::cli {
namespace {

struct EvalArgs {
  std::string model, against;
  std::string precision = "exact", against_precision = "exact";
  int threads = 0;
  int64_t max_length = 16384;
  std::vector<std::string> requests;
  std::string json_out;
  bool per_request = false;
};

int run(const EvalArgs& a) {
  auto p = parse_precision(a.precision);
  auto q = parse_precision(a.against_precision);
  if (!p || !q) return print_error_json("--precision and --against-precision must be exact or fast");
  EngineOptions ea{.model = a.model, .precision = *p, .threads = a.threads};
  EngineOptions eb{.model = a.against, .precision = *q, .threads = a.threads};
  auto candidate = Engine::load(ea);
  auto baseline = Engine::load(eb);
  DecideOptions d;
  d.max_length = a.max_length;
  const auto requests = eval::load_requests(a.requests);
  std::vector<eval::RequestComparison> rows;
  for (const auto& r : requests) {
    rows.push_back(eval::compare_request(*candidate, *baseline, r, d));
    std::fprintf(stderr, "\r%zu/%zu requests", rows.size(), requests.size());
  }
  std::fprintf(stderr, "\n");
  const eval::ComparisonSummary s = eval::summarize(rows);

  std::cout << fmt::format("| model | against | requests | refused | questions | top agree | max |Δp| | mean max |Δp| "
                           "| mean |Δlogit| | max |Δlogit| |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::cout << fmt::format("| {} ({}) | {} ({}) | {} | {} | {} | {:.4f} | {:.5f} | {:.5f} | {:.5f} | {:.5f} |\n", a.model,
                           a.precision, a.against, a.against_precision, s.requests, s.refused, s.questions,
                           s.questions ? static_cast<double>(s.top_agreements) / s.questions : 1.0, s.max_abs_dp,
                           s.mean_max_abs_dp, s.mean_abs_dlogit, s.max_abs_dlogit);
  if (a.per_request) {
    std::cout << "\n| request | top agree | max |Δp| | mean |Δlogit| |\n|---|---:|---:|---:|\n";
    for (const auto& r : rows) {
      if (r.error)
        std::cout << fmt::format("| {} | refused{} | | |\n", r.name, r.errors_agree ? "" : " (by one side only)");
      else
        std::cout << fmt::format("| {} | {}/{} | {:.5f} | {:.5f} |\n", r.name, r.top_agreements, r.questions,
                                 r.max_abs_dp, r.mean_abs_dlogit);
    }
  }
  if (!a.json_out.empty()) {
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
    std::ofstream(a.json_out) << j.dump(2) << "\n";
  }
  // A request that one side answers and the other refuses is a real disagreement.
  return s.error_disagreements ? 1 : 0;
}

Register reg{{"eval", "Compare a model's decisions with another's on the same requests (|Δp|, top agreement)",
              [](CLI::App& sub) {
                auto a = std::make_shared<EvalArgs>();
                sub.add_option("--model", a->model, "the model under test (folder or repo id)")->required();
                sub.add_option("--against", a->against, "the baseline model (e.g. the BF16 release)")->required();
                sub.add_option("--precision", a->precision, "exact or fast, for --model")->capture_default_str();
                sub.add_option("--against-precision", a->against_precision, "exact or fast, for --against")
                    ->capture_default_str();
                sub.add_option("--threads", a->threads, "CPU threads (0: all)")->check(in_range(0, 4096));
                sub.add_option("--max-length", a->max_length, "token budget per request")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--json", a->json_out, "also write the summary as JSON to this file");
                sub.add_flag("--per-request", a->per_request, "one table row per request");
                sub.add_option("requests", a->requests,
                               "request .json / .jsonl files, or folders of them or of case folders with request.json")
                    ->required();
                return std::function<int()>([a]() { return run(*a); });
              },
              75}};

}  // namespace
}  // namespace stave::cli
