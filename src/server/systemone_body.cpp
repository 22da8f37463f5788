#include "server/systemone_body.h"

#include <fmt/format.h>

#include "text/json_value.h"

namespace stave::server {

std::variant<DecisionRequest, ApiError> parse_systemone_body(std::string_view body, const ModelNames& names,
                                                             const RequestLimits& limits) {
  JsonValue json;
  try {
    json = parse_json(body, json_parse_limits(limits.json));
  } catch (const JsonValueLimitError& e) {
    return api_error(413, "too_many_values", e.what(), {"body"});
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kRequestTooLarge) return api_error(413, "too_large", e.what(), {"body"});
    return api_error(400, "json_invalid", e.what(), {"body"});
  }
  // A client talking to the wrong server learns that first, before any schema detail.
  auto not_served = [&](const std::string& model) {
    std::string list;
    for (const auto& n : names.public_names()) list += (list.empty() ? "" : ", ") + n;
    return api_error(404, "model_not_found",
                     "model \"" + model + "\" is not served here (this server answers: " + list + ")",
                     {"body", "model"});
  };
  if (json.is_object())
    if (const JsonValue* m = json.find("model"); m && m->is_string() && !names.serves(m->as_string()))
      return not_served(m->as_string());
  try {
    DecisionRequest request = parse_decision_request(json, limits);
    if (!names.serves(request.model)) return not_served(request.model);
    return request;
  } catch (const RequestValidationError& e) {
    return from_validation(e);
  } catch (const Error& e) {
    return from_engine_error(e);
  }
}

std::string render_systemone_reply(const Decision& d, double latency_ms, bool workers_ai_envelope) {
  // Without logits (the server never asks for them) the response ends with the usage object:
  // {..., "usage": {"input_tokens": N, "output_tokens": 0}}. The extras go at its end, so the
  // reference's bytes before them are untouched.
  std::string body = d.json;
  if (body.size() < 2 || body.compare(body.size() - 2, 2, "}}") != 0 ||
      body.rfind("\"usage\":{") == std::string::npos)
    throw Error(ErrorKind::kInternal, "a decision response does not end with its usage object");
  body.insert(body.size() - 2, fmt::format(",\"truncated_state_tokens\":{},\"latency_ms\":{:.3f}",
                                           d.usage.truncated_state_tokens, latency_ms));
  if (!workers_ai_envelope) return body;
  return "{\"result\":" + body + ",\"success\":true,\"errors\":[],\"messages\":[]}";
}

}  // namespace stave::server
