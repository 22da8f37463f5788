// A SystemOne decision request, parsed and checked the way the reference's `systemone()` checks
// it (same error texts), plus stave's own clear errors where the reference would crash.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stave/errors.h"
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

// Protocol limits beyond the reference (the server turns them on; the reference has none).
// Every limit is off by default; workers_ai() gives the hosted service's published set.
struct RequestLimits {
  JsonParseLimits json;                       // for the text overload
  std::optional<size_t> max_questions;        // Workers AI: 64
  std::optional<size_t> min_choice_options, max_choice_options;  // 2..255
  std::optional<size_t> min_score_levels, max_score_levels;      // 2..10
  std::optional<size_t> max_id_length;        // 100 (code points)
  bool strict_ids = false;                    // question ids: ASCII letters, digits, _ . - (non-empty);
                                              // choice option ids: non-empty
  bool require_instructions = false;          // a non-empty string, an object or an array
  bool reject_unknown_fields = false;         // fields other than the protocol's
  std::optional<size_t> max_images;           // Workers AI: 4
  std::optional<size_t> max_image_bytes;      // decoded, per image; Workers AI: 4 MiB
  std::optional<size_t> max_total_image_bytes;  // decoded, all images; Workers AI: 8 MiB
  bool allow_videos = true;                     // Workers AI has no videos field: refused there
  std::optional<size_t> max_videos;
  std::optional<size_t> max_video_bytes;        // decoded, per video (a frame list: all its frames)
  std::optional<size_t> max_video_frames;       // items of a frame list

  static RequestLimits workers_ai();
};

// Field-level validation failure: `path` locates the field (["questions", "a", "criteria"],
// ["images", "0"]), `message` is the reference's text where it has one.
struct RequestIssue {
  std::vector<std::string> path;
  std::string message;
  std::string type;  // short machine name: "missing", "type_error", "value_error", "limit", "unsupported"
};

// What parse_decision_request throws: kind kInvalidRequest, what() = the first issue's message
// (the reference's text when the reference has one), plus every issue found for a 422 detail.
class RequestValidationError : public Error {
 public:
  explicit RequestValidationError(std::vector<RequestIssue> issues);
  const std::vector<RequestIssue>& issues() const { return issues_; }

 private:
  std::vector<RequestIssue> issues_;
};

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
