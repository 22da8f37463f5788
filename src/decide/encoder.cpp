// encode_record: the Clef prompt of the release code, tokenized segment by segment.
#include "decide/encoder.h"

#include <string>

#include "stave/errors.h"
#include "text/python_json.h"

namespace stave {
namespace {

constexpr const char* kPrefix =
    "<|im_start|>system\nRead the complete state and schema. Decide every field jointly. Each answer must be "
    "exactly one of that field's allowed options.<|im_end|>\n<|im_start|>user\nSTATE:\n";
constexpr const char* kSuffix = "\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:";

// The schema part: ids plus spans relative to its own start.
struct Schema {
  std::vector<int32_t> ids;
  std::vector<EncodedQuestion> questions;
};

class SchemaBuilder {
 public:
  explicit SchemaBuilder(const Tokenizer& tokenizer) : tok_(tokenizer) {}

  void text(const std::string& s) {
    std::vector<int32_t> ids = tok_.encode(s);
    out_.ids.insert(out_.ids.end(), ids.begin(), ids.end());
  }
  int64_t size() const { return static_cast<int64_t>(out_.ids.size()); }
  Schema take() { return std::move(out_); }
  std::vector<EncodedQuestion>& questions() { return out_.questions; }

 private:
  const Tokenizer& tok_;
  Schema out_;
};

// {"option_id": id, "description": d} rendered with sort_keys ("description" first); the
// description key is left out when d is null.
JsonValue option_object(const OptionSpec& option) {
  std::vector<JsonValue::Member> members;
  if (option.has_description && !option.description.is_null()) members.emplace_back("description", option.description);
  members.emplace_back("option_id", JsonValue::string(option.id));
  return JsonValue::object(std::move(members));
}

Schema encode_schema(const DecisionRequest& request, const Tokenizer& tokenizer) {
  SchemaBuilder b(tokenizer);
  b.text("\n\nSCHEMA FIELDS:\n");
  for (size_t i = 0; i < request.questions.size(); ++i) {
    const QuestionSpec& q = request.questions[i];
    EncodedQuestion eq;
    eq.id = q.id;
    eq.type = q.type;
    b.text("\nFIELD " + std::to_string(i + 1) + "\nID: " + q.id + "\nTYPE: " + question_type_name(q.type) +
           "\nINSTRUCTION: ");
    // Missing, null or "" instructions fall back to str(question_id).
    const JsonValue& ins = q.instructions;
    bool fall_back = ins.is_null() || (ins.is_string() && ins.as_string().empty());
    int64_t start = b.size();
    b.text(fall_back ? q.id : clef_render(ins));
    eq.question_span = {start, b.size()};
    if (eq.question_span.first == eq.question_span.second) {
      throw Error(ErrorKind::kInvalidRequest,
                  "question " + std::to_string(i + 1) + " has an empty question text (empty id and no instructions)");
    }
    b.text("\nALLOWED OPTIONS:\n");
    for (size_t j = 0; j < q.options.size(); ++j) {
      b.text("OPTION " + std::to_string(j + 1) + ": ");
      int64_t os = b.size();
      b.text(python_json_dumps(option_object(q.options[j])));
      eq.option_spans.push_back({os, b.size()});
      eq.option_ids.push_back(q.options[j].id);
      b.text("\n");
    }
    b.text("END FIELD\n");
    b.questions().push_back(std::move(eq));
  }
  return b.take();
}

void shift(Span& s, int64_t by) {
  s.first += by;
  s.second += by;
}

}  // namespace

EncodedRequest encode_request(const DecisionRequest& request, const Tokenizer& tokenizer, const EncodeOptions& options,
                              const MediaEncoder* media) {
  if (options.max_state_tokens && *options.max_state_tokens < 0) {
    throw Error(ErrorKind::kInvalidRequest,
                "max_state_tokens must not be negative; got " + std::to_string(*options.max_state_tokens));
  }
  if (request.questions.empty()) throw Error(ErrorKind::kInvalidRequest, "at least one question is required");
  EncodedRequest out;
  Schema schema = encode_schema(request, tokenizer);

  std::vector<int32_t> prefix = tokenizer.encode(kPrefix);
  if (!request.images.empty() || !request.videos.empty()) {
    if (!media) {
      const char* what = request.images.empty() ? "videos" : "images";
      throw Error(ErrorKind::kUnsupported, std::string("this request has ") + what +
                                               ", but no image encoder is available here (" + what +
                                               " need the model's vision tower and processor)");
    }
    EncodedMedia m;
    std::vector<int32_t> media_ids = media->encode_media(request, &m);
    m.token_offset = static_cast<int64_t>(prefix.size());
    prefix.insert(prefix.end(), media_ids.begin(), media_ids.end());
    out.media = std::move(m);
  }
  std::vector<int32_t> suffix = tokenizer.encode(kSuffix);
  const int64_t fixed = static_cast<int64_t>(prefix.size() + schema.ids.size() + suffix.size());
  if (fixed > options.max_length) {
    throw Error(ErrorKind::kInvalidRequest, "schema requires " + std::to_string(fixed) +
                                                " tokens before state; maximum is " + std::to_string(options.max_length));
  }
  std::vector<int32_t> state = tokenizer.encode(clef_render(request.state));
  const int64_t full_state = static_cast<int64_t>(state.size());
  if (options.max_state_tokens && static_cast<int64_t>(state.size()) > *options.max_state_tokens)
    state.resize(static_cast<size_t>(*options.max_state_tokens));
  // Keep the head of the state (a cut on token ids, as the reference does).
  if (static_cast<int64_t>(state.size()) > options.max_length - fixed)
    state.resize(static_cast<size_t>(options.max_length - fixed));
  out.state_tokens = static_cast<int64_t>(state.size());
  out.truncated_state_tokens = full_state - out.state_tokens;

  const int64_t offset = static_cast<int64_t>(prefix.size() + state.size());
  out.input_ids.reserve(static_cast<size_t>(fixed) + state.size());
  out.input_ids.insert(out.input_ids.end(), prefix.begin(), prefix.end());
  out.input_ids.insert(out.input_ids.end(), state.begin(), state.end());
  out.input_ids.insert(out.input_ids.end(), schema.ids.begin(), schema.ids.end());
  out.input_ids.insert(out.input_ids.end(), suffix.begin(), suffix.end());
  for (auto& q : schema.questions) {
    shift(q.question_span, offset);
    for (auto& s : q.option_spans) shift(s, offset);
  }
  out.questions = std::move(schema.questions);
  return out;
}

}  // namespace stave
