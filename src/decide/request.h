// A SystemOne decision request, parsed and checked the way the reference's `systemone()` checks
// it (same error texts), plus stave's own clear errors where the reference would crash.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stave/errors.h"
#include "stave/request.h"
#include "text/json_value.h"
#include "vision/video_bytes.h"  // VideoInput: a file or a list of frames

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
  std::vector<VideoInput> videos;       // placed after all images, as the reference's processor text
};

// RequestLimits, RequestIssue and RequestValidationError are public: include/stave/request.h.

// The public JSON limits as the JSON parser takes them.
JsonParseLimits json_parse_limits(const JsonLimits& limits);

// Checks in the reference's order (model/state, questions, then each question's type and
// criteria), then stave's checks where the reference would crash (a question that is not an
// object, criteria of the wrong shape, an empty question span), then images, then `limits`.
// The first issue is therefore the one the reference reports first.
// Images: data URLs (data:image/png|jpeg|webp;base64,...) or {"content_type", "base64"}; the
// bytes are base64-decoded but not inspected (src/vision decodes them).
DecisionRequest parse_decision_request(const JsonValue& body, const RequestLimits& limits = {});
DecisionRequest parse_decision_request(std::string_view json_text, const RequestLimits& limits = {});

// Every issue of a request body (empty when it is valid).
std::vector<RequestIssue> validate_decision_request(const JsonValue& body, const RequestLimits& limits = {});

}  // namespace stave
