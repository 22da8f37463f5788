#include "eval/label_scoring.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "decide/answers.h"

namespace stave::eval {

namespace {

std::string instructions_text(const JsonValue& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.as_string();
  return json_text(v);
}

std::vector<double> log_softmax(const std::vector<float>& x) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  const double lse = m + std::log(s);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) - lse;
  return out;
}

std::optional<double> ratio(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  return static_cast<double>(a) / static_cast<double>(b);
}

}  // namespace

size_t top_index(const std::vector<double>& p) {
  size_t best = 0;
  for (size_t k = 1; k < p.size(); ++k)
    if (p[k] > p[best]) best = k;
  return best;
}

double kl_from_logits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) throw Error(ErrorKind::kInternal, "KL of logit vectors of different lengths");
  const std::vector<double> la = log_softmax(a), lb = log_softmax(b);
  double kl = 0;
  for (size_t i = 0; i < a.size(); ++i) kl += std::exp(la[i]) * (la[i] - lb[i]);
  return std::max(kl, 0.0);
}

RecordResult score_record(const LabelledRecord& record, const Decision& model, const Decision* against) {
  RecordResult r;
  r.line = record.line;
  r.key = record.key;
  r.state_excerpt = record.state_excerpt;
  if (against && against->answers.size() != model.answers.size())
    throw Error(ErrorKind::kInternal, "the two models answered different numbers of questions");
  for (size_t i = 0; i < model.answers.size(); ++i) {
    const Answer& a = model.answers[i];
    QuestionResult q;
    q.id = a.id;
    q.type = a.type;
    if (i < record.request.questions.size()) q.instructions = instructions_text(record.request.questions[i].instructions);
    for (const auto& [qid, option] : record.labels)
      if (qid == a.id) q.label = option;
    q.option_ids = a.option_ids;
    q.p_model = a.probabilities;
    q.top_model = a.option_ids.at(top_index(a.probabilities));
    if (against) {
      const Answer& b = against->answers[i];
      if (b.id != a.id || b.option_ids != a.option_ids || b.logit_option_ids != a.logit_option_ids)
        throw Error(ErrorKind::kInternal, "the two models answered question " + a.id + " differently shaped");
      q.p_against = b.probabilities;
      q.top_against = b.option_ids.at(top_index(b.probabilities));
      q.kl = kl_from_logits(b.logits, a.logits);
      for (size_t k = 0; k < q.p_model.size(); ++k)
        q.max_abs_dp = std::max(q.max_abs_dp, std::abs(q.p_model[k] - q.p_against[k]));
    }
    r.questions.push_back(std::move(q));
  }
  return r;
}

std::optional<double> EvalSummary::model_accuracy() const { return ratio(model_correct, labelled); }
std::optional<double> EvalSummary::against_accuracy() const { return ratio(against_correct, labelled); }
double EvalSummary::top1_agreement() const { return ratio(agreements, questions).value_or(1.0); }
double EvalSummary::mean_kl() const { return questions ? sum_kl / static_cast<double>(questions) : 0.0; }
double EvalSummary::mean_max_abs_dp() const {
  return questions ? sum_max_abs_dp / static_cast<double>(questions) : 0.0;
}

EvalSummary summarize_records(const std::vector<RecordResult>& results, bool has_against) {
  EvalSummary s;
  s.has_against = has_against;
  for (const auto& r : results) {
    if (!r.error.empty()) {
      ++s.bad_records;
      continue;
    }
    ++s.records;
    for (const auto& q : r.questions) {
      ++s.questions;
      if (q.label) {
        ++s.labelled;
        if (q.top_model == *q.label) ++s.model_correct;
        if (has_against && q.top_against == *q.label) ++s.against_correct;
      }
      if (has_against) {
        if (q.top_model == q.top_against) ++s.agreements;
        s.sum_kl += q.kl;
        s.sum_max_abs_dp += q.max_abs_dp;
        s.max_abs_dp = std::max(s.max_abs_dp, q.max_abs_dp);
      }
    }
  }
  return s;
}

std::string summary_json(const EvalSummary& s) {
  auto acc = [](std::optional<double> v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); };
  nlohmann::ordered_json j;
  j["records"] = s.records;
  j["questions"] = s.questions;
  j["model"] = {{"accuracy", acc(s.model_accuracy())}};
  if (s.has_against) {
    j["against"] = {{"accuracy", acc(s.against_accuracy())}};
    j["top1_agreement"] = s.top1_agreement();
    j["mean_kl"] = s.mean_kl();
    j["max_abs_dp"] = s.max_abs_dp;
    j["mean_max_abs_dp"] = s.mean_max_abs_dp();
  }
  j["labelled"] = s.labelled;
  j["bad_records"] = s.bad_records;
  return j.dump();
}

}  // namespace stave::eval
