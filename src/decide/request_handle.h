// The parsed request behind the public stave::Request (include/stave/request.h), for stave's
// own front ends that parse with parse_decision_request themselves (the server's limits and
// 422 details, the CLI's image files) and then hand the result to the engine.
#pragma once
#include "decide/request.h"
#include "stave/request.h"

namespace stave {

struct Request::Impl {
  DecisionRequest request;
};

// Wraps an already parsed and checked request (moved, not copied).
Request make_request(DecisionRequest request);

inline const DecisionRequest& decision_request(const Request& r) { return r.impl().request; }

}  // namespace stave
