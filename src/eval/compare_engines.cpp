#include "eval/compare_engines.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "util/mapped_file.h"

namespace stave::eval {
namespace fs = std::filesystem;

namespace {

void add_path(const fs::path& p, std::vector<NamedRequest>& out) {
  if (fs::is_directory(p)) {
    if (fs::is_regular_file(p / "request.json")) {
      out.push_back({p.filename().string(), read_file((p / "request.json").string())});
      return;
    }
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(p)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries)
      if (fs::is_directory(e) || e.extension() == ".json" || e.extension() == ".jsonl") add_path(e, out);
    return;
  }
  if (!fs::is_regular_file(p))
    throw Error(ErrorKind::kInvalidRequest, "request path \"" + p.string() + "\" does not exist");
  if (p.extension() == ".jsonl") {
    std::ifstream in(p);
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      out.push_back({p.filename().string() + ":" + std::to_string(n), line});
    }
    return;
  }
  out.push_back({p.filename().string(), read_file(p.string())});
}

}  // namespace

std::vector<NamedRequest> load_requests(const std::vector<std::string>& paths) {
  std::vector<NamedRequest> out;
  for (const auto& p : paths) add_path(p, out);
  if (out.empty()) throw Error(ErrorKind::kInvalidRequest, "no requests found in the given paths");
  return out;
}

RequestComparison compare_request(const Engine& candidate, const Engine& baseline, const NamedRequest& request,
                                  const DecideOptions& options) {
  RequestComparison r;
  r.name = request.name;
  Decision a, b;
  bool a_err = false, b_err = false;
  ErrorKind a_kind{}, b_kind{};
  try {
    a = candidate.decide(request.json, options);
  } catch (const Error& e) {
    a_err = true;
    a_kind = e.kind();
    r.error_message = e.what();
  }
  try {
    b = baseline.decide(request.json, options);
  } catch (const Error& e) {
    b_err = true;
    b_kind = e.kind();
  }
  if (a_err || b_err) {
    r.error = true;
    r.errors_agree = a_err && b_err && a_kind == b_kind;
    return r;
  }
  // Questions by id: both engines answer in request order, so the i-th answers correspond.
  double sum_dlogit = 0;
  int64_t n_logits = 0;
  for (size_t q = 0; q < a.answers.size() && q < b.answers.size(); ++q) {
    const Answer& x = a.answers[q];
    const Answer& y = b.answers[q];
    ++r.questions;
    for (size_t k = 0; k < x.probabilities.size() && k < y.probabilities.size(); ++k)
      r.max_abs_dp = std::max(r.max_abs_dp, std::abs(x.probabilities[k] - y.probabilities[k]));
    for (size_t k = 0; k < x.logits.size() && k < y.logits.size(); ++k) {
      const double d = std::abs(static_cast<double>(x.logits[k]) - y.logits[k]);
      sum_dlogit += d;
      r.max_abs_dlogit = std::max(r.max_abs_dlogit, d);
      ++n_logits;
    }
    auto top = [](const Answer& ans) {
      return std::max_element(ans.probabilities.begin(), ans.probabilities.end()) - ans.probabilities.begin();
    };
    if (!x.probabilities.empty() && top(x) == top(y)) ++r.top_agreements;
  }
  if (a.answers.size() != b.answers.size()) r.errors_agree = false;
  r.mean_abs_dlogit = n_logits ? sum_dlogit / static_cast<double>(n_logits) : 0;
  return r;
}

ComparisonSummary summarize(const std::vector<RequestComparison>& rows) {
  ComparisonSummary s;
  double sum_dp = 0, sum_dlogit = 0;
  for (const auto& r : rows) {
    ++s.requests;
    if (!r.errors_agree) ++s.error_disagreements;
    if (r.error) {
      ++s.refused;
      continue;
    }
    ++s.answered;
    s.questions += r.questions;
    s.top_agreements += r.top_agreements;
    s.max_abs_dp = std::max(s.max_abs_dp, r.max_abs_dp);
    s.max_abs_dlogit = std::max(s.max_abs_dlogit, r.max_abs_dlogit);
    sum_dp += r.max_abs_dp;
    sum_dlogit += r.mean_abs_dlogit;
  }
  if (s.answered) {
    s.mean_max_abs_dp = sum_dp / static_cast<double>(s.answered);
    s.mean_abs_dlogit = sum_dlogit / static_cast<double>(s.answered);
  }
  return s;
}

}  // namespace stave::eval
