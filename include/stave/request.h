// A SystemOne decision request, parsed and checked once, as a value the engine takes.
//
//   stave::Request r = stave::Request::parse(R"({"model":"clef","state":"...","questions":{...}})");
//   std::vector<stave::Decision> d = engine->decide_batch(std::vector{r, r2});
//
// parse() checks the request the way Cloudflare's reference `systemone()` does (same error
// texts), plus stave's own checks where the reference would crash, plus optional protocol
// limits (RequestLimits). A Request is immutable and cheap to copy (copies share the parsed body).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stave/errors.h"

namespace stave {

// Limits on the JSON text itself.
struct JsonLimits {
  size_t max_depth = 128;        // nested arrays/objects; the document itself is depth 0
  size_t max_bytes = 64u << 20;  // over it: stave::Error(kRequestTooLarge)
  size_t max_values = SIZE_MAX;  // scalars, arrays and objects in the document (kRequestTooLarge)
};

// Protocol limits beyond the reference (the server turns them on; the reference has none).
// Every limit is off by default; workers_ai() gives the hosted service's published set.
struct RequestLimits {
  JsonLimits json;                            // for the text overload
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

// What Request::parse throws for a request that breaks the protocol: kind kInvalidRequest,
// what() = the first issue's message (the reference's text when the reference has one), plus
// every issue found (an HTTP front end's 422 detail).
class RequestValidationError : public Error {
 public:
  explicit RequestValidationError(std::vector<RequestIssue> issues);
  const std::vector<RequestIssue>& issues() const { return issues_; }

 private:
  std::vector<RequestIssue> issues_;
};

// One question of a parsed request, as the response will name it.
struct RequestQuestion {
  std::string id;
  std::string type;                     // "noul", "choice", "score"
  std::vector<std::string> option_ids;  // request order (noul: true, false; score: "0".."n-1")
};

class Request {
 public:
  // Parses and checks a request body (JSON text). Throws RequestValidationError listing every
  // issue, or stave::Error: kInvalidRequest for text that is not JSON, kRequestTooLarge over a
  // JsonLimits limit. Images (data URLs or {"content_type", "base64"}) are base64-decoded here;
  // their pixels are decoded when the engine answers.
  static Request parse(std::string_view json_text, const RequestLimits& limits = {});

  const std::string& model() const;               // the request's "model"
  std::vector<RequestQuestion> questions() const;  // request key order
  size_t image_count() const;

  // The parsed form, for stave's own front ends (src/decide/request_handle.h).
  struct Impl;
  explicit Request(std::shared_ptr<const Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// Every issue of a request body, in the order the reference checks them (empty when the request
// is valid). Text that is not JSON, or over a JsonLimits limit, throws stave::Error as parse does.
std::vector<RequestIssue> validate_request(std::string_view json_text, const RequestLimits& limits = {});

}  // namespace stave
