// The request path on arbitrary text: parse_json, then parse_decision_request (with and
// without limits), python_json_dumps of the state, and encode_request with the real Qwen3
// tokenizer; the raw input also goes through the tokenizer alone (added tokens, NFC, the Split
// regex, byte-level BPE and its word cache, decode). Each step must either succeed or throw
// stave::Error; the output of dumps must parse back to the same rendering, spans must lie inside
// the sequence and every id inside the vocabulary.
// The tokenizer comes from STAVE_FUZZ_TOKENIZER (a tokenizer.json or a release folder);
// scripts/fuzz.sh sets it to the fixture release. Without it the target says so and falls back
// to one id per byte, which fuzzes the request path but not the tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

std::unique_ptr<stave::Tokenizer> load_tokenizer() {
  const char* path = std::getenv("STAVE_FUZZ_TOKENIZER");
  if (path && *path) {
    try {
      auto t = stave::Tokenizer::from_file(path);
      std::fprintf(stderr, "fuzz_request: tokenizer %s (%d ids)\n", path, t->vocab_size());
      return t;
    } catch (const stave::Error& e) {
      std::fprintf(stderr, "fuzz_request: cannot load STAVE_FUZZ_TOKENIZER: %s\n", e.what());
      std::abort();
    }
  }
  std::fprintf(stderr, "fuzz_request: STAVE_FUZZ_TOKENIZER is not set: one id per byte, the tokenizer is not fuzzed\n");
  return std::make_unique<ByteTokenizer>();
}

const stave::Tokenizer& tokenizer() {
  static const std::unique_ptr<stave::Tokenizer> t = load_tokenizer();
  return *t;
}

void check_ids(const std::vector<int32_t>& ids, const stave::Tokenizer& tok) {
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
}

// The tokenizer alone on the raw input: encode must give ids inside the vocabulary that decode
// back without an error; invalid UTF-8 must be refused with stave::Error.
void fuzz_tokenizer(std::string_view text) {
  const stave::Tokenizer& tok = tokenizer();
  try {
    std::vector<int32_t> ids = tok.encode(text);
    check_ids(ids, tok);
    (void)tok.decode(ids);
    (void)tok.pre_tokenize(text);
  } catch (const stave::Error&) {
  }
}

}  // namespace

// Loading the 11 MB tokenizer takes seconds under the sanitizers: before the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz_tokenizer(text);
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
      stave::EncodeOptions options;
      options.max_length = 2048;
      stave::EncodedRequest e = stave::encode_request(request, tokenizer(), options);
      if (e.input_ids.size() > 2048 || e.questions.size() != request.questions.size()) std::abort();
      check_ids(e.input_ids, tokenizer());
      for (const auto& q : e.questions) {
        check_span(q.question_span, e.input_ids.size());
        for (const auto& s : q.option_spans) check_span(s, e.input_ids.size());
      }
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
