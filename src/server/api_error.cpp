#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace stave::server {

ApiError api_error(int status, std::string type, std::string msg, std::vector<std::string> loc) {
  ApiError e;
  e.status = status;
  e.issues.push_back({std::move(loc), std::move(msg), std::move(type)});
  return e;
}

ApiError from_validation(const RequestValidationError& v) {
  ApiError e;
  e.status = 422;
  for (const RequestIssue& i : v.issues()) {
    ApiIssue a;
    a.loc.push_back("body");
    a.loc.insert(a.loc.end(), i.path.begin(), i.path.end());
    a.msg = i.message;
    a.type = i.type.empty() ? "value_error" : i.type;
    e.issues.push_back(std::move(a));
  }
  if (e.issues.empty()) e.issues.push_back({{"body"}, v.what(), "value_error"});
  return e;
}

ApiError from_engine_error(const Error& err) {
  const std::string msg = err.what();
  // Image errors are labelled "images[0]: ..." or "image ..." by src/vision.
  const bool image = msg.rfind("image", 0) == 0;
  const bool video = msg.rfind("video", 0) == 0;  // "video 1: ..." (src/vision/video_media)
  std::vector<std::string> loc = {"body"};
  if (image) loc.push_back("images");
  if (video) loc.push_back("videos");
  switch (err.kind()) {
    case ErrorKind::kInvalidRequest: return api_error(422, "value_error", msg, loc);
    case ErrorKind::kUnsupported: return api_error(422, "unsupported", msg, loc);
    case ErrorKind::kRequestTooLarge: return api_error(413, "not_admitted", msg, loc);
    default: return api_error(500, "internal_error", msg);
  }
}

int workers_ai_code(const ApiError& e) {
  switch (e.status) {
    case 400: return 5006;
    case 401: return 10000;
    case 404: return 7000;
    case 413: return 5021;
    case 422: return 5012;
    case 429:
    case 503: return 3040;
    case 504: return 3046;
    default: return 5000;
  }
}

std::string render_error(const ApiError& e, bool workers_ai_envelope) {
  nlohmann::ordered_json j;
  if (workers_ai_envelope) {
    nlohmann::ordered_json errors = nlohmann::ordered_json::array();
    const int code = workers_ai_code(e);
    for (const auto& i : e.issues) {
      std::string where;
      for (size_t k = 1; k < i.loc.size(); ++k) where += (k > 1 ? "." : "") + i.loc[k];
      errors.push_back({{"message", where.empty() ? i.msg : where + ": " + i.msg}, {"code", code}});
    }
    j["errors"] = errors;
    j["success"] = false;
    j["result"] = nlohmann::ordered_json::object();
    j["messages"] = nlohmann::ordered_json::array();
  } else {
    nlohmann::ordered_json detail = nlohmann::ordered_json::array();
    for (const auto& i : e.issues) detail.push_back({{"loc", i.loc}, {"msg", i.msg}, {"type", i.type}});
    j["detail"] = detail;
  }
  // Messages quote client text: invalid UTF-8 is replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace stave::server
