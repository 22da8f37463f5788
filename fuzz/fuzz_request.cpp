// The request path on arbitrary text: parse_json, then parse_decision_request (with and
// without limits), python_json_dumps of the state, and encode_request with a one-id-per-byte
// tokenizer (the real one has its own tests). Each step must either succeed or throw
// stave::Error; the output of dumps must parse back to the same rendering, and spans must lie
// inside the sequence.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "decide/encoder.h"
#include "decide/request.h"
#include "stave/errors.h"
#include "text/json_value.h"
#include "text/python_json.h"

namespace {

class ByteTokenizer : public stave::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return std::string(ids.begin(), ids.end()); }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  int32_t vocab_size() const override { return 256; }
  std::vector<std::string> pre_tokenize(std::string_view text) const override { return {std::string(text)}; }
};

void check_span(const stave::Span& s, size_t n) {
  if (s.first < 0 || s.first >= s.second || static_cast<size_t>(s.second) > n) std::abort();
}

}  // namespace

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
    if (request.images.empty()) {
      ByteTokenizer tok;
      stave::EncodeOptions options;
      options.max_length = 2048;
      stave::EncodedRequest e = stave::encode_request(request, tok, options);
      if (e.input_ids.size() > 2048 || e.questions.size() != request.questions.size()) std::abort();
      for (const auto& q : e.questions) {
        check_span(q.question_span, e.input_ids.size());
        for (const auto& s : q.option_spans) check_span(s, e.input_ids.size());
      }
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
