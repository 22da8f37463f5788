// A SystemOne decision request, parsed and checked the way the reference's `systemone()` checks
// it (same error texts), plus stave's own clear errors where the reference would crash.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/json_value.h"

namespace stave {

enum class QuestionType : int { kNoul = 0, kChoice = 1, kScore = 2 };
const char* question_type_name(QuestionType t);  // "noul", "choice", "score"

struct OptionSpec {
  std::string id;            // "true"/"false", the choice key, or the score level "0".."n-1"
  JsonValue description;     // rendered inside {"description":...,"option_id":...}
  bool has_description = true;  // false when the description is null (key omitted)
};

struct QuestionSpec {
  std::string id;
  QuestionType type = QuestionType::kNoul;
  JsonValue instructions;          // as given (null when missing)
  std::vector<OptionSpec> options;  // in the reference's scoring order (noul true,false;
                                    // choice keys sorted by code point; score 0..n-1)
  std::vector<size_t> request_order;  // option indices in the order the request listed them
  JsonValue criteria;               // as given (the score legend echoes it)
};

struct ImageInput {
  std::string content_type;  // "image/png", "image/jpeg", "image/webp"
  std::string data;          // decoded bytes
};

struct DecisionRequest {
  std::string model;
  JsonValue state;
  std::vector<QuestionSpec> questions;  // request key order
  std::vector<ImageInput> images;
};

// Protocol limits beyond the reference (the server turns them on; the reference has none).
struct RequestLimits {
  std::optional<size_t> max_questions;        // Workers AI: 64
  std::optional<size_t> min_choice_options, max_choice_options;  // 2..255
  std::optional<size_t> min_score_levels, max_score_levels;      // 2..10
  std::optional<size_t> max_id_length;        // 100, letters/digits/_ . -
  bool strict_ids = false;
  bool require_instructions = false;
  size_t max_images = 4;
  size_t max_image_bytes = 4u << 20;          // decoded, per image
  size_t max_total_image_bytes = 8u << 20;
};

// Field-level validation failure: `path` locates the field (["questions", "a", "criteria"]),
// `message` is the reference's text where it has one.
struct RequestIssue {
  std::vector<std::string> path;
  std::string message;
  std::string type;  // short machine name: "missing", "type_error", "value_error", "limit"
};

// Throws stave::Error(kInvalidRequest) with the first issue's message.
DecisionRequest parse_decision_request(const JsonValue& body, const RequestLimits& limits = {});
DecisionRequest parse_decision_request(std::string_view json_text, const RequestLimits& limits = {});

}  // namespace stave
