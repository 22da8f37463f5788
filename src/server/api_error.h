// Errors as HTTP replies. Two spellings:
//   - Jev / FastAPI style (default): {"detail": [{"loc": ["body", ...], "msg": ..., "type": ...}]}
//     with one entry per issue, `loc` naming the field;
//   - the Workers AI envelope: {"errors": [{"message": ..., "code": N}], "success": false,
//     "result": {}, "messages": []} with Workers AI's codes (5006, 5012, 5021, 3040, ...).
#pragma once
#include <string>
#include <vector>

#include "decide/request.h"
#include "stave/errors.h"

namespace stave::server {

struct ApiIssue {
  std::vector<std::string> loc;  // starts with "body" for fields of the request body
  std::string msg;
  std::string type;
};

struct ApiError {
  int status = 500;
  std::vector<ApiIssue> issues;  // at least one
  int retry_after_s = 0;         // > 0: a Retry-After header (503)

  const std::string& type() const { return issues.front().type; }
  const std::string& message() const { return issues.front().msg; }
};

ApiError api_error(int status, std::string type, std::string msg, std::vector<std::string> loc = {});

// 422 with every issue the request parser found.
ApiError from_validation(const RequestValidationError& e);
// An error the engine raised for a request that passed validation (encoding, images, the
// truncation policy): kInvalidRequest/kUnsupported → 422, kRequestTooLarge → 413 not_admitted,
// anything else → 500.
ApiError from_engine_error(const Error& e);

std::string render_error(const ApiError& e, bool workers_ai_envelope);
int workers_ai_code(const ApiError& e);

}  // namespace stave::server
