// Scores one labelled record's decisions: per question the model's (and the baseline's) option
// probabilities, top options, whether the top option is the label, KL(p_against ‖ p_model) and the
// largest |Δp|; and the summary over records that `stave eval --data` prints.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/labelled_data.h"
#include "stave/engine.h"

namespace stave::eval {

struct QuestionResult {
  std::string id, type;
  std::string instructions;              // as text (a structured instruction as compact JSON)
  std::optional<std::string> label;      // the labelled option id, if any
  std::vector<std::string> option_ids;   // request order (noul: true, false; score: "0".."n-1")
  std::vector<double> p_model, p_against;  // the answers' probabilities, same order; p_against empty without a baseline
  std::string top_model, top_against;    // first option of maximal probability in request order
  double kl = 0;                         // KL(p_against ‖ p_model) in nats (0 without a baseline)
  double max_abs_dp = 0;                 // max over options of |p_model − p_against|
};

struct RecordResult {
  int64_t line = 0;
  std::string key;                       // LabelledRecord::key
  std::string error;                     // the record was refused (by the data check or a model)
  std::string state_excerpt;
  std::vector<QuestionResult> questions;
};

// The index of the first maximal probability (the answers' rule for a choice).
size_t top_index(const std::vector<double>& p);

// KL(softmax(a) ‖ softmax(b)) in nats from two logit vectors of the same option order, in double
// with log-softmax (finite even where an fp32 probability underflows to 0).
double kl_from_logits(const std::vector<float>& a, const std::vector<float>& b);

// Scores a record from the model's decision and, when given, the baseline's (same request).
RecordResult score_record(const LabelledRecord& record, const Decision& model, const Decision* against);

struct EvalSummary {
  bool has_against = false;
  int64_t records = 0;         // records answered by every model
  int64_t bad_records = 0;     // records refused (invalid line, bad label, or a model's error)
  int64_t questions = 0;       // questions answered
  int64_t labelled = 0;        // of which labelled
  int64_t model_correct = 0, against_correct = 0, agreements = 0;
  double sum_kl = 0, max_abs_dp = 0, sum_max_abs_dp = 0;

  std::optional<double> model_accuracy() const;    // correct / labelled (none without labels)
  std::optional<double> against_accuracy() const;
  double top1_agreement() const;                   // agreements / questions
  double mean_kl() const;                          // mean over questions
  double mean_max_abs_dp() const;                  // mean over questions of the per-question max |Δp|
};

EvalSummary summarize_records(const std::vector<RecordResult>& results, bool has_against);

// {"records", "questions", "model": {"accuracy"}, ["against": {"accuracy"}, "top1_agreement",
// "mean_kl", "max_abs_dp", "mean_max_abs_dp"], "labelled", "bad_records"}; an accuracy without
// labelled questions is null.
std::string summary_json(const EvalSummary& s);

}  // namespace stave::eval
