// SystemOne request checks, in the reference's order and with its texts, then stave's own.
#include "decide/request.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "decide/image_input.h"
#include "decide/video_input.h"

namespace stave {

const char* question_type_name(QuestionType t) {
  switch (t) {
    case QuestionType::kNoul: return "noul";
    case QuestionType::kChoice: return "choice";
    case QuestionType::kScore: return "score";
  }
  return "?";
}

RequestLimits RequestLimits::workers_ai() {
  RequestLimits l;
  l.max_questions = 64;
  l.min_choice_options = 2;
  l.max_choice_options = 255;
  l.min_score_levels = 2;
  l.max_score_levels = 10;
  l.max_id_length = 100;
  l.strict_ids = true;
  l.require_instructions = true;
  l.reject_unknown_fields = true;
  l.max_images = 4;
  l.max_image_bytes = size_t{4} << 20;
  l.max_total_image_bytes = size_t{8} << 20;
  l.allow_videos = false;  // the hosted schema has no videos field
  return l;
}

JsonParseLimits json_parse_limits(const JsonLimits& limits) {
  JsonParseLimits l;
  l.max_depth = limits.max_depth;
  l.max_bytes = limits.max_bytes;
  l.max_values = limits.max_values;
  return l;
}

RequestValidationError::RequestValidationError(std::vector<RequestIssue> issues)
    : Error(ErrorKind::kInvalidRequest, issues.empty() ? "invalid request" : issues.front().message),
      issues_(std::move(issues)) {}

namespace {

constexpr const char* kNoulTrue = "The proposition is true or the answer is yes.";
constexpr const char* kNoulFalse = "The proposition is false or the answer is no.";

std::optional<QuestionType> parse_type(const JsonValue* type) {
  if (!type || !type->is_string()) return std::nullopt;
  const std::string& t = type->as_string();
  if (t == "noul") return QuestionType::kNoul;
  if (t == "choice") return QuestionType::kChoice;
  if (t == "score") return QuestionType::kScore;
  return std::nullopt;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_strict_id(std::string_view id) {
  if (id.empty()) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

// `instructions` missing, null or "" falls back to the question id (the reference's rule).
bool instructions_fall_back(const JsonValue* ins) {
  return !ins || ins->is_null() || (ins->is_string() && ins->as_string().empty());
}

// Object members with Python dict semantics (first position, last value), for objects built
// through the API; parse_json already merges duplicates.
std::vector<const JsonValue::Member*> dict_members(const JsonValue& object) {
  std::vector<const JsonValue::Member*> out;
  std::unordered_map<std::string_view, size_t> seen;
  for (const auto& m : object.members()) {
    auto [it, inserted] = seen.emplace(m.first, out.size());
    if (inserted) out.push_back(&m);
    else out[it->second] = &m;
  }
  return out;
}

OptionSpec make_option(std::string id, const JsonValue& description) {
  OptionSpec o;
  o.id = std::move(id);
  o.has_description = !description.is_null();
  if (o.has_description) o.description = description;
  return o;
}

class Checker {
 public:
  Checker(const JsonValue& body, const RequestLimits& limits) : body_(body), limits_(limits) {}

  // Runs every check; fills `out` (all but the state) when there is no issue.
  std::vector<RequestIssue> run(DecisionRequest* out) {
    if (!body_.is_object()) {
      add({}, "request body must be a JSON object", "type_error");
      return std::move(issues_);
    }
    check_reference_rules();
    check_question_shapes();
    check_images();
    check_limits();
    if (issues_.empty() && out) build(out);
    return std::move(issues_);
  }

 private:
  void add(std::vector<std::string> path, std::string message, std::string type) {
    issues_.push_back({std::move(path), std::move(message), std::move(type)});
  }

  // systemone(): model and state, a non-empty questions dict, then per question its type and,
  // for choice/score, truthy criteria.
  void check_reference_rules() {
    const JsonValue* model = body_.find("model");
    if (!model || !model->is_string())
      add({"model"}, "model and state are required", model ? "type_error" : "missing");
    if (!body_.find("state")) add({"state"}, "model and state are required", "missing");
    const JsonValue* questions = body_.find("questions");
    if (!questions || !questions->is_object() || questions->members().empty()) {
      add({"questions"}, "at least one question is required",
          !questions ? "missing" : questions->is_object() ? "value_error" : "type_error");
      return;
    }
    questions_ = dict_members(*questions);
    for (const auto* member : questions_) {
      const std::string& qid = member->first;
      const JsonValue& q = member->second;
      if (!q.is_object()) {
        add({"questions", qid}, qid + ": question must be an object", "type_error");
        continue;
      }
      const JsonValue* type = q.find("type");
      if (!parse_type(type)) {
        add({"questions", qid, "type"}, qid + ": type must be noul, choice, or score", type ? "value_error" : "missing");
        continue;
      }
      const JsonValue* criteria = q.find("criteria");
      if (type->as_string() != "noul" && !(criteria && criteria->truthy()))
        add({"questions", qid, "criteria"}, qid + ": criteria must not be empty", criteria ? "value_error" : "missing");
    }
  }

  // Where the reference would crash (AttributeError, TypeError) or build an empty span.
  void check_question_shapes() {
    for (const auto* member : questions_) {
      const std::string& qid = member->first;
      const JsonValue& q = member->second;
      if (!q.is_object()) continue;
      auto type = parse_type(q.find("type"));
      if (!type) continue;
      const JsonValue* criteria = q.find("criteria");
      std::vector<std::string> path{"questions", qid, "criteria"};
      if (criteria && criteria->truthy()) {
        if (*type == QuestionType::kNoul && !criteria->is_object())
          add(path, qid + ": criteria must be an object with optional \"true\" and \"false\" descriptions", "type_error");
        if (*type == QuestionType::kChoice && !criteria->is_object())
          add(path, qid + ": criteria must be an object mapping option ids to descriptions", "type_error");
        if (*type == QuestionType::kScore && !criteria->is_array())
          add(path, qid + ": criteria must be an array of level descriptions, level 0 first", "type_error");
      }
      if (qid.empty() && instructions_fall_back(q.find("instructions"))) {
        add({"questions", qid, "instructions"},
            "a question with an empty id needs instructions (its question text would be empty)", "value_error");
      }
    }
  }

  void check_images() {
    check_videos();
    const JsonValue* images = body_.find("images");
    if (!images || images->is_null()) return;
    if (!images->is_array()) {
      add({"images"}, "images must be an array", "type_error");
      return;
    }
    if (limits_.max_images && images->items().size() > *limits_.max_images) {
      add({"images"},
          "at most " + std::to_string(*limits_.max_images) + " images are allowed; got " +
              std::to_string(images->items().size()),
          "limit");
      return;  // do not decode what will be refused anyway
    }
    size_t total = 0;
    bool total_reported = false;
    for (size_t i = 0; i < images->items().size(); ++i) {
      std::string index = std::to_string(i);
      ImageItemResult r = parse_image_item(images->items()[i], limits_.max_image_bytes, limits_.reject_unknown_fields);
      if (!r.image) {
        add({"images", index}, "images[" + index + "]: " + r.error, r.error_type);
        continue;
      }
      total += r.image->data.size();
      if (limits_.max_total_image_bytes && total > *limits_.max_total_image_bytes && !total_reported) {
        total_reported = true;
        add({"images"},
            "images total more than " + std::to_string(*limits_.max_total_image_bytes) + " bytes decoded", "limit");
      }
      images_.push_back(std::move(*r.image));
    }
  }

  void check_videos() {
    const JsonValue* videos = body_.find("videos");
    if (!videos || videos->is_null()) return;
    if (!limits_.allow_videos) {
      if (videos->truthy()) add({"videos"}, "videos are not supported", "unsupported");
      return;
    }
    if (!videos->is_array()) {
      add({"videos"}, "videos must be an array", "type_error");
      return;
    }
    if (limits_.max_videos && videos->items().size() > *limits_.max_videos) {
      add({"videos"},
          "at most " + std::to_string(*limits_.max_videos) + " videos are allowed; got " +
              std::to_string(videos->items().size()),
          "limit");
      return;
    }
    VideoItemLimits vl;
    vl.max_bytes = limits_.max_video_bytes;
    vl.max_frames = limits_.max_video_frames;
    vl.reject_unknown_fields = limits_.reject_unknown_fields;
    for (size_t i = 0; i < videos->items().size(); ++i) {
      const std::string index = std::to_string(i);
      VideoItemResult r = parse_video_item(videos->items()[i], vl);
      if (!r.video) {
        add({"videos", index}, "videos[" + index + "]: " + r.error, r.error_type);
        continue;
      }
      videos_.push_back(std::move(*r.video));
    }
  }

  void check_limits() {
    if (limits_.reject_unknown_fields) {
      for (const auto& m : body_.members()) {
        static const char* kKnown[] = {"model", "state", "questions", "images", "videos"};
        if (std::find(std::begin(kKnown), std::end(kKnown), m.first) == std::end(kKnown))
          add({m.first}, "unknown field '" + m.first + "'", "value_error");
      }
    }
    if (limits_.max_questions && questions_.size() > *limits_.max_questions) {
      add({"questions"},
          "at most " + std::to_string(*limits_.max_questions) + " questions are allowed; got " +
              std::to_string(questions_.size()),
          "limit");
    }
    for (const auto* member : questions_) {
      const std::string& qid = member->first;
      const JsonValue& q = member->second;
      std::vector<std::string> at{"questions", qid};
      if (limits_.max_id_length && count_code_points(qid) > *limits_.max_id_length) {
        add(at, qid + ": question ids may be at most " + std::to_string(*limits_.max_id_length) + " characters",
            "limit");
      }
      if (limits_.strict_ids && !is_strict_id(qid)) {
        add(at, qid + ": question ids must be non-empty and use only letters, digits, '_', '.' and '-'",
            "value_error");
      }
      if (!q.is_object()) continue;
      if (limits_.reject_unknown_fields) {
        for (const auto& m : q.members())
          if (m.first != "type" && m.first != "instructions" && m.first != "criteria")
            add({"questions", qid, m.first}, qid + ": unknown field '" + m.first + "'", "value_error");
      }
      if (limits_.require_instructions) {
        const JsonValue* ins = q.find("instructions");
        bool ok = ins && ((ins->is_string() && !ins->as_string().empty()) || ins->is_object() || ins->is_array());
        if (!ok) {
          add({"questions", qid, "instructions"},
              qid + ": instructions must be a non-empty string, an object or an array", ins ? "value_error" : "missing");
        }
      }
      auto type = parse_type(q.find("type"));
      const JsonValue* criteria = q.find("criteria");
      std::vector<std::string> cpath{"questions", qid, "criteria"};
      if (type == QuestionType::kChoice && criteria && criteria->is_object()) {
        size_t n = dict_members(*criteria).size();
        check_count(cpath, qid, n, limits_.min_choice_options, limits_.max_choice_options, "options");
        if (limits_.strict_ids) {
          for (const auto& m : criteria->members())
            if (m.first.empty()) add(cpath, qid + ": option ids must not be empty", "value_error");
        }
      }
      if (type == QuestionType::kScore && criteria && criteria->is_array()) {
        check_count(cpath, qid, criteria->items().size(), limits_.min_score_levels, limits_.max_score_levels,
                    "score levels");
      }
    }
  }

  void check_count(const std::vector<std::string>& path, const std::string& qid, size_t n, std::optional<size_t> min,
                   std::optional<size_t> max, const char* what) {
    if (min && n < *min)
      add(path, qid + ": at least " + std::to_string(*min) + " " + what + " are required; got " + std::to_string(n), "limit");
    if (max && n > *max)
      add(path, qid + ": at most " + std::to_string(*max) + " " + what + " are allowed; got " + std::to_string(n), "limit");
  }

  void build(DecisionRequest* out) {
    out->model = body_.find("model")->as_string();
    out->images = std::move(images_);
    out->videos = std::move(videos_);
    out->questions.clear();
    for (const auto* member : questions_) {
      const JsonValue& q = member->second;
      QuestionSpec spec;
      spec.id = member->first;
      spec.type = *parse_type(q.find("type"));
      if (const JsonValue* ins = q.find("instructions")) spec.instructions = *ins;
      const JsonValue* criteria = q.find("criteria");
      if (criteria) spec.criteria = *criteria;
      switch (spec.type) {
        case QuestionType::kNoul: {
          // Defaults updated with the request's criteria (falsy criteria: no update); only the
          // "true" and "false" keys matter, an explicit null removes the description.
          JsonValue descriptions[2] = {JsonValue::string(kNoulTrue), JsonValue::string(kNoulFalse)};
          if (criteria && criteria->truthy()) {
            for (const auto* m : dict_members(*criteria)) {
              if (m->first == "true") descriptions[0] = m->second;
              if (m->first == "false") descriptions[1] = m->second;
            }
          }
          spec.options.push_back(make_option("true", descriptions[0]));
          spec.options.push_back(make_option("false", descriptions[1]));
          spec.request_order = {0, 1};
          break;
        }
        case QuestionType::kChoice: {
          auto members = dict_members(*criteria);
          // sorted() by key: code point order, which is UTF-8 byte order.
          std::vector<size_t> by_key(members.size());
          std::iota(by_key.begin(), by_key.end(), size_t{0});
          std::sort(by_key.begin(), by_key.end(),
                    [&](size_t a, size_t b) { return members[a]->first < members[b]->first; });
          spec.request_order.assign(members.size(), 0);
          for (size_t rank = 0; rank < by_key.size(); ++rank) {
            const auto* m = members[by_key[rank]];
            spec.options.push_back(make_option(m->first, m->second));
            spec.request_order[by_key[rank]] = rank;
          }
          break;
        }
        case QuestionType::kScore: {
          const auto& levels = criteria->items();
          for (size_t k = 0; k < levels.size(); ++k) {
            spec.options.push_back(make_option(std::to_string(k), levels[k]));
            spec.request_order.push_back(k);
          }
          break;
        }
      }
      out->questions.push_back(std::move(spec));
    }
  }

  const JsonValue& body_;
  const RequestLimits& limits_;
  std::vector<RequestIssue> issues_;
  std::vector<const JsonValue::Member*> questions_;
  std::vector<ImageInput> images_;
  std::vector<VideoInput> videos_;
};

}  // namespace

std::vector<RequestIssue> validate_decision_request(const JsonValue& body, const RequestLimits& limits) {
  return Checker(body, limits).run(nullptr);
}

DecisionRequest parse_decision_request(const JsonValue& body, const RequestLimits& limits) {
  DecisionRequest request;
  auto issues = Checker(body, limits).run(&request);
  if (!issues.empty()) throw RequestValidationError(std::move(issues));
  request.state = *body.find("state");
  return request;
}

DecisionRequest parse_decision_request(std::string_view json_text, const RequestLimits& limits) {
  JsonValue body = parse_json(json_text, json_parse_limits(limits.json));
  DecisionRequest request;
  auto issues = Checker(body, limits).run(&request);
  if (!issues.empty()) throw RequestValidationError(std::move(issues));
  // The parsed body is ours: move the state out instead of copying it.
  for (auto& m : body.members()) {
    if (m.first == "state") {
      request.state = std::move(m.second);
      break;
    }
  }
  return request;
}

}  // namespace stave
