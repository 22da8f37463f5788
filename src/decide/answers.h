// From the joint head's per-question logits to the SystemOne response, as the reference's
// `systemone_answer` builds it (Cloudflare's Clef release code): fp32 softmax per question,
// noul = P(true), choice = first max in request order,
// score = Σ k·p_k from unrounded probabilities, every number through Python round(x, 4).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "decide/encoder.h"
#include "decide/request.h"
#include "stave/options.h"
#include "text/json_value.h"

namespace stave {

// The confidence of one question under `mode` (ConfidenceMode and its names are in
// include/stave/options.h), from its unrounded probabilities p over n options: reference
// max_k p_k (= p(choice) for a choice), Workers AI (n·Σp² − 1)/(n − 1), Jev (n·p_max − 1)/(n − 1)
// clipped to [0, 1]. For one option the two compatibility formulas divide by zero; a single
// option is certain, so they give 1.
double confidence_value(ConfidenceMode mode, const std::vector<double>& probabilities);

struct AnswerOptions {
  ConfidenceMode confidence = ConfidenceMode::kReference;
  bool include_logits = false;  // add "logits": {id: [fp32 logits in the head's option order]}
};

struct QuestionAnswer {
  std::string id;
  QuestionType type = QuestionType::kNoul;
  // The head's view: its option order and fp32 logits in that order.
  std::vector<std::string> scored_option_ids;
  std::vector<float> logits;
  // The response's view, in request order (noul: true, false; choice: criteria keys as the
  // request lists them; score: "0".."n-1"): ids and unrounded probabilities (the fp32
  // softmax widened to double, as Python's .tolist() does).
  std::vector<std::string> option_ids;
  std::vector<double> probabilities;
  // The answer, unrounded (the response shows each through Python round(x, 4)).
  std::string choice;       // choice: the first option of maximal probability in request order
  double value = 0.0;       // noul: P(true); score: Σ k·p_k (in level order); choice: p(choice)
  double confidence = 0.0;  // per the confidence mode (the response shows it for choice and score)
  std::vector<JsonValue> legend;  // score: the request's criteria, level 0 first
};

struct SystemOneResponse {
  std::string model;
  std::vector<QuestionAnswer> answers;  // request order
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  bool include_logits = false;
  ConfidenceMode confidence_mode = ConfidenceMode::kReference;
};

// The head's logits are the reference's scoring order (`questions[i].option_ids`); the request
// supplies the model name, question ids and types, and the criteria (choice keys in request
// order, score levels for the legend). Throws stave::Error(kInternal) when the three disagree
// (question count, ids, option ids, logit counts).
SystemOneResponse build_systemone_response(const DecisionRequest& request,
                                           const std::vector<EncodedQuestion>& questions,
                                           const std::vector<std::vector<float>>& logits, int64_t input_tokens,
                                           const AnswerOptions& options = {});

// The fp32 softmax of one question's logits (max-shifted exp, fp32 sum, times its reciprocal,
// like torch's CPU softmax), widened to double.
std::vector<double> softmax_probabilities(const std::vector<float>& logits);

// JSON text of the response with the reference's key order: {"model", "answers", "usage"
// [, "logits"]}; noul {type, noul}; choice {type, choice, confidence, probabilities}; score
// {type, score, confidence, legend, probabilities}. Compact, UTF-8 unescaped, floats in
// Python's repr spelling, legend values with the request's own key order.
std::string render_systemone_response(const SystemOneResponse& response);

// Compact JSON text of any JsonValue, keeping object member order: strings with standard JSON
// escaping (", \, control characters; non-ASCII raw), integers with their exact digits, floats
// in Python's repr spelling.
std::string json_text(const JsonValue& value);

}  // namespace stave
