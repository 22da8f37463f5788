// The body → reply path of POST /v1/systemone, without HTTP or threads (the fuzzer drives it):
// parse the JSON (400), refuse a model this server does not serve (404), check the request
// under the server's limits (422 naming the field), and render an answered decision.
#pragma once
#include <string>
#include <string_view>
#include <variant>

#include "decide/request.h"
#include "server/api_error.h"
#include "server/model_names.h"
#include "stave/engine.h"

namespace stave::server {

std::variant<DecisionRequest, ApiError> parse_systemone_body(std::string_view body, const ModelNames& names,
                                                             const RequestLimits& limits);

// Decision::json plus usage.truncated_state_tokens and usage.latency_ms, optionally wrapped in
// the Workers AI envelope. Everything else is byte for byte what `stave decide` prints.
std::string render_systemone_reply(const Decision& d, double latency_ms, bool workers_ai_envelope);

}  // namespace stave::server
