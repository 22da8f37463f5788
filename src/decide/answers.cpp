#include "decide/answers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "stave/errors.h"
#include "text/python_json.h"

namespace stave {
namespace {

const char* type_name(QuestionType t) {
  switch (t) {
    case QuestionType::kNoul: return "noul";
    case QuestionType::kChoice: return "choice";
    case QuestionType::kScore: return "score";
  }
  return "?";
}

double round4(double x) { return python_round(x, 4); }

[[noreturn]] void mismatch(const std::string& what) {
  throw Error(ErrorKind::kInternal, "systemone answers: " + what);
}

// p[id] of the reference's `dict(zip(option_ids, probabilities))`.
double probability_of(const std::vector<std::string>& ids, const std::vector<double>& p, const std::string& id,
                      const std::string& question) {
  auto it = std::find(ids.begin(), ids.end(), id);
  if (it == ids.end()) mismatch("question " + question + " has no scored option " + id);
  return p[static_cast<size_t>(it - ids.begin())];
}

QuestionAnswer answer_question(const QuestionSpec& spec, const EncodedQuestion& encoded,
                               const std::vector<float>& logits, ConfidenceMode mode) {
  if (spec.id != encoded.id) mismatch("request question " + spec.id + " was encoded as " + encoded.id);
  if (spec.type != encoded.type) mismatch("question " + spec.id + " changed type in encoding");
  if (logits.size() != encoded.option_ids.size())
    mismatch("question " + spec.id + " has " + std::to_string(logits.size()) + " logits for " +
             std::to_string(encoded.option_ids.size()) + " options");

  QuestionAnswer a;
  a.id = spec.id;
  a.type = spec.type;
  a.scored_option_ids = encoded.option_ids;
  a.logits = logits;
  const std::vector<double> scored_p = softmax_probabilities(logits);

  // The options in the order the response lists them.
  switch (spec.type) {
    case QuestionType::kNoul: a.option_ids = encoded.option_ids; break;
    case QuestionType::kChoice:
      if (!spec.criteria.is_object()) mismatch("choice question " + spec.id + " has no criteria object");
      for (const JsonValue::Member& m : spec.criteria.members()) a.option_ids.push_back(m.first);
      break;
    case QuestionType::kScore:
      if (!spec.criteria.is_array()) mismatch("score question " + spec.id + " has no criteria list");
      for (size_t k = 0; k < spec.criteria.items().size(); ++k) a.option_ids.push_back(std::to_string(k));
      a.legend = spec.criteria.items();
      break;
  }
  if (a.option_ids.size() != encoded.option_ids.size())
    mismatch("question " + spec.id + " lists " + std::to_string(a.option_ids.size()) + " options but " +
             std::to_string(encoded.option_ids.size()) + " were scored");
  for (const std::string& id : a.option_ids)
    a.probabilities.push_back(probability_of(encoded.option_ids, scored_p, id, spec.id));

  switch (spec.type) {
    case QuestionType::kNoul:
      a.value = probability_of(encoded.option_ids, scored_p, "true", spec.id);
      a.confidence = confidence_value(mode, a.probabilities);  // not in the response (as the reference)
      break;
    case QuestionType::kChoice: {
      // Python max(): the first option of maximal probability, in request order.
      size_t best = 0;
      for (size_t k = 1; k < a.probabilities.size(); ++k)
        if (a.probabilities[k] > a.probabilities[best]) best = k;
      a.choice = a.option_ids[best];
      a.value = a.probabilities[best];
      a.confidence = confidence_value(mode, a.probabilities);  // reference: p(choice) = max
      break;
    }
    case QuestionType::kScore: {
      double expected = 0.0;  // Python sum() in level order, from unrounded probabilities
      for (size_t k = 0; k < a.probabilities.size(); ++k) expected += static_cast<double>(k) * a.probabilities[k];
      a.value = expected;
      a.confidence = confidence_value(mode, a.probabilities);
      break;
    }
  }
  return a;
}

void append_json(std::string& out, const JsonValue& v) {
  switch (v.kind()) {
    case JsonValue::Kind::kNull: out += "null"; break;
    case JsonValue::Kind::kBool: out += v.as_bool() ? "true" : "false"; break;
    case JsonValue::Kind::kInteger: out += v.as_string(); break;
    case JsonValue::Kind::kFloat: out += python_float_repr(v.as_double()); break;
    case JsonValue::Kind::kString: append_python_json_string(out, v.as_string()); break;
    case JsonValue::Kind::kArray: {
      out.push_back('[');
      bool first = true;
      for (const JsonValue& item : v.items()) {
        if (!first) out.push_back(',');
        first = false;
        append_json(out, item);
      }
      out.push_back(']');
      break;
    }
    case JsonValue::Kind::kObject: {
      out.push_back('{');
      bool first = true;
      for (const JsonValue::Member& m : v.members()) {
        if (!first) out.push_back(',');
        first = false;
        append_python_json_string(out, m.first);
        out.push_back(':');
        append_json(out, m.second);
      }
      out.push_back('}');
      break;
    }
  }
}

void append_key(std::string& out, std::string_view key) {
  append_python_json_string(out, key);
  out.push_back(':');
}

void append_probabilities(std::string& out, const QuestionAnswer& a) {
  append_key(out, "probabilities");
  out.push_back('{');
  for (size_t k = 0; k < a.option_ids.size(); ++k) {
    if (k) out.push_back(',');
    append_key(out, a.option_ids[k]);
    out += python_float_repr(round4(a.probabilities[k]));
  }
  out.push_back('}');
}

void append_answer(std::string& out, const QuestionAnswer& a) {
  out.push_back('{');
  append_key(out, "type");
  append_python_json_string(out, type_name(a.type));
  switch (a.type) {
    case QuestionType::kNoul:
      out.push_back(',');
      append_key(out, "noul");
      out += python_float_repr(round4(a.value));
      break;
    case QuestionType::kChoice:
      out.push_back(',');
      append_key(out, "choice");
      append_python_json_string(out, a.choice);
      out.push_back(',');
      append_key(out, "confidence");
      out += python_float_repr(round4(a.confidence));
      out.push_back(',');
      append_probabilities(out, a);
      break;
    case QuestionType::kScore:
      out.push_back(',');
      append_key(out, "score");
      out += python_float_repr(round4(a.value));
      out.push_back(',');
      append_key(out, "confidence");
      out += python_float_repr(round4(a.confidence));
      out.push_back(',');
      append_key(out, "legend");
      out.push_back('{');
      for (size_t k = 0; k < a.legend.size(); ++k) {
        if (k) out.push_back(',');
        append_key(out, std::to_string(k));
        append_json(out, a.legend[k]);
      }
      out.push_back('}');
      out.push_back(',');
      append_probabilities(out, a);
      break;
  }
  out.push_back('}');
}

}  // namespace

double confidence_value(ConfidenceMode mode, const std::vector<double>& p) {
  if (p.empty()) mismatch("confidence of a question without options");
  const double p_max = *std::max_element(p.begin(), p.end());
  const double n = static_cast<double>(p.size());
  switch (mode) {
    case ConfidenceMode::kReference: return p_max;
    case ConfidenceMode::kWorkersAi: {
      if (p.size() == 1) return 1.0;
      double sum_sq = 0.0;
      for (double x : p) sum_sq += x * x;
      // In [0, 1] mathematically (Σp² >= 1/n); the clamp only keeps rounding noise from
      // printing as -0.0.
      return std::clamp((n * sum_sq - 1.0) / (n - 1.0), 0.0, 1.0);
    }
    case ConfidenceMode::kJev:
      if (p.size() == 1) return 1.0;
      return std::clamp((n * p_max - 1.0) / (n - 1.0), 0.0, 1.0);
  }
  return p_max;
}

std::vector<double> softmax_probabilities(const std::vector<float>& logits) {
  std::vector<double> out(logits.size());
  if (logits.empty()) return out;
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<float> e(logits.size());
  float sum = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    e[i] = std::exp(logits[i] - mx);
    sum += e[i];
  }
  const float inv = 1.0f / sum;
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(e[i] * inv);
  return out;
}

SystemOneResponse build_systemone_response(const DecisionRequest& request,
                                           const std::vector<EncodedQuestion>& questions,
                                           const std::vector<std::vector<float>>& logits, int64_t input_tokens,
                                           const AnswerOptions& options) {
  if (request.questions.size() != questions.size() || questions.size() != logits.size())
    mismatch(std::to_string(request.questions.size()) + " request questions, " + std::to_string(questions.size()) +
             " encoded, " + std::to_string(logits.size()) + " with logits");
  SystemOneResponse r;
  r.model = request.model;
  r.input_tokens = input_tokens;
  r.output_tokens = 0;  // a decision is one prefill; nothing is generated
  r.include_logits = options.include_logits;
  r.confidence_mode = options.confidence;
  for (size_t i = 0; i < questions.size(); ++i)
    r.answers.push_back(answer_question(request.questions[i], questions[i], logits[i], options.confidence));
  return r;
}

std::string render_systemone_response(const SystemOneResponse& r) {
  std::string out = "{";
  append_key(out, "model");
  append_python_json_string(out, r.model);
  out.push_back(',');
  append_key(out, "answers");
  out.push_back('{');
  for (size_t i = 0; i < r.answers.size(); ++i) {
    if (i) out.push_back(',');
    append_key(out, r.answers[i].id);
    append_answer(out, r.answers[i]);
  }
  out += "},";
  append_key(out, "usage");
  out += "{\"input_tokens\":" + std::to_string(r.input_tokens) + ",\"output_tokens\":" +
         std::to_string(r.output_tokens) + "}";
  if (r.include_logits) {
    out.push_back(',');
    append_key(out, "logits");
    out.push_back('{');
    for (size_t i = 0; i < r.answers.size(); ++i) {
      if (i) out.push_back(',');
      append_key(out, r.answers[i].id);
      out.push_back('[');
      for (size_t j = 0; j < r.answers[i].logits.size(); ++j) {
        if (j) out.push_back(',');
        out += python_float_repr(static_cast<double>(r.answers[i].logits[j]));
      }
      out.push_back(']');
    }
    out.push_back('}');
  }
  out.push_back('}');
  return out;
}

std::string json_text(const JsonValue& value) {
  std::string out;
  append_json(out, value);
  return out;
}

}  // namespace stave
