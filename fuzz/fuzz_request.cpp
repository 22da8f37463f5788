// The request path on arbitrary text: parse_json, then parse_decision_request (with and
// without limits), then python_json_dumps of the state. Each step must either succeed or throw
// stave::Error; the output of dumps must parse back to the same rendering.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "decide/request.h"
#include "stave/errors.h"
#include "text/json_value.h"
#include "text/python_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  stave::JsonValue body;
  try {
    body = stave::parse_json(text);
  } catch (const stave::Error&) {
    return 0;
  }
  // Rendering is a fixed point: dumps(parse(dumps(v))) == dumps(v).
  std::string rendered = stave::python_json_dumps(body);
  try {
    if (stave::python_json_dumps(stave::parse_json(rendered)) != rendered) std::abort();
  } catch (const stave::Error&) {
    std::abort();  // our own output must parse
  }
  (void)stave::validate_decision_request(body, stave::RequestLimits::workers_ai());
  try {
    stave::DecisionRequest request = stave::parse_decision_request(body);
    std::string state = stave::clef_render(request.state);
    for (const auto& q : request.questions) {
      if (q.options.size() != q.request_order.size()) std::abort();
      for (const auto& o : q.options)
        if (o.has_description) (void)stave::python_json_dumps(o.description);
    }
    (void)state;
  } catch (const stave::Error&) {
  }
  return 0;
}
