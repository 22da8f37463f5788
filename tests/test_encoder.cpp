// encode_request's layout, independent of the real tokenizer: with a tokenizer that gives one
// id per byte, the ids spell the prompt text, so the prompt and spans can be compared with the
// rendered example of clef-decision.md §4.6 (copied from the spec, markers included).
#include <gtest/gtest.h>

#include <cstring>

#include "decide/encoder.h"
#include "decide/request.h"
#include "stave/errors.h"

namespace stave {
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s.push_back(static_cast<char>(id));
    return s;
  }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  int32_t vocab_size() const override { return 256; }
  std::vector<std::string> pre_tokenize(std::string_view text) const override { return {std::string(text)}; }
};

// clef-decision.md §4.6, verbatim; ⟦Q⟧…⟦/Q⟧ mark question spans and ⟦O⟧…⟦/O⟧ option spans.
const char* kSpecExample = R"(<|im_start|>system
Read the complete state and schema. Decide every field jointly. Each answer must be exactly one of that field's allowed options.<|im_end|>
<|im_start|>user
STATE:
Checkout has been failing for every customer for the last hour.

SCHEMA FIELDS:

FIELD 1
ID: urgent
TYPE: noul
INSTRUCTION: ⟦Q⟧Is this support request urgent?⟦/Q⟧
ALLOWED OPTIONS:
OPTION 1: ⟦O⟧{"description":"The proposition is true or the answer is yes.","option_id":"true"}⟦/O⟧
OPTION 2: ⟦O⟧{"description":"The proposition is false or the answer is no.","option_id":"false"}⟦/O⟧
END FIELD

FIELD 2
ID: team
TYPE: choice
INSTRUCTION: ⟦Q⟧Which team should handle this request?⟦/Q⟧
ALLOWED OPTIONS:
OPTION 1: ⟦O⟧{"description":"Payments, invoices, and refunds","option_id":"billing"}⟦/O⟧
OPTION 2: ⟦O⟧{"description":"Plans and upgrades","option_id":"sales"}⟦/O⟧
OPTION 3: ⟦O⟧{"description":"Outages, errors, and configuration","option_id":"technical"}⟦/O⟧
END FIELD

FIELD 3
ID: severity
TYPE: score
INSTRUCTION: ⟦Q⟧How severe is the customer impact?⟦/Q⟧
ALLOWED OPTIONS:
OPTION 1: ⟦O⟧{"description":"No impact","option_id":"0"}⟦/O⟧
OPTION 2: ⟦O⟧{"description":"Minor","option_id":"1"}⟦/O⟧
OPTION 3: ⟦O⟧{"description":"Major","option_id":"2"}⟦/O⟧
OPTION 4: ⟦O⟧{"description":"Critical","option_id":"3"}⟦/O⟧
END FIELD

<|im_end|>
<|im_start|>assistant
<think>

</think>

JOINT SCHEMA DECISIONS:)";

const char* kDocsRequest = R"({"model":"clef","state":"Checkout has been failing for every customer for the last hour.",
 "questions":{
  "urgent":{"type":"noul","instructions":"Is this support request urgent?"},
  "team":{"type":"choice","instructions":"Which team should handle this request?",
          "criteria":{"billing":"Payments, invoices, and refunds","technical":"Outages, errors, and configuration","sales":"Plans and upgrades"}},
  "severity":{"type":"score","instructions":"How severe is the customer impact?",
              "criteria":["No impact","Minor","Major","Critical"]}}})";

// Removes the markers; returns the text and the spans they marked, in order of appearance.
std::string strip_markers(std::string text, std::vector<Span>* question_spans, std::vector<Span>* option_spans) {
  std::string out;
  int64_t open = -1;
  for (size_t i = 0; i < text.size();) {
    auto at = [&](const char* m) { return text.compare(i, std::strlen(m), m) == 0; };
    if (at("⟦Q⟧") || at("⟦O⟧")) {
      open = static_cast<int64_t>(out.size());
      i += std::strlen("⟦Q⟧");
    } else if (at("⟦/Q⟧") || at("⟦/O⟧")) {
      (at("⟦/Q⟧") ? question_spans : option_spans)->push_back({open, static_cast<int64_t>(out.size())});
      i += std::strlen("⟦/Q⟧");
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

TEST(Encoder, ReproducesTheSpecExample) {
  ByteTokenizer tok;
  EncodedRequest e = encode_request(parse_decision_request(kDocsRequest), tok);
  std::vector<Span> qs, os;
  std::string expected = strip_markers(kSpecExample, &qs, &os);
  EXPECT_EQ(tok.decode(e.input_ids), expected);
  ASSERT_EQ(e.questions.size(), 3u);
  std::vector<Span> got_os;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e.questions[i].question_span, qs[i]) << i;
    for (const auto& s : e.questions[i].option_spans) got_os.push_back(s);
  }
  EXPECT_EQ(got_os, os);
  EXPECT_EQ(e.questions[1].option_ids, (std::vector<std::string>{"billing", "sales", "technical"}));
  EXPECT_EQ(e.questions[2].option_ids, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(e.questions[0].type, QuestionType::kNoul);
  EXPECT_EQ(e.questions[1].type, QuestionType::kChoice);
  EXPECT_EQ(e.questions[2].type, QuestionType::kScore);
  EXPECT_EQ(e.state_tokens, 63);  // "Checkout has ... hour." is 63 bytes
  EXPECT_EQ(e.truncated_state_tokens, 0);
  EXPECT_FALSE(e.media.has_value());
}

// The text between "INSTRUCTION: " and "\nALLOWED" and the option objects, for one question.
struct Rendered {
  std::string question;
  std::vector<std::string> options;
};
Rendered render_one(const std::string& question_json, const std::string& state = "\"s\"") {
  ByteTokenizer tok;
  auto r = parse_decision_request(R"({"model":"m","state":)" + state + R"(,"questions":{"q":)" + question_json + "}}");
  EncodedRequest e = encode_request(r, tok);
  std::string text = tok.decode(e.input_ids);
  Rendered out;
  const auto& q = e.questions.at(0);
  out.question = text.substr(q.question_span.first, q.question_span.second - q.question_span.first);
  for (const auto& s : q.option_spans) out.options.push_back(text.substr(s.first, s.second - s.first));
  return out;
}

TEST(Encoder, InstructionFallbackAndRendering) {
  EXPECT_EQ(render_one(R"({"type":"noul"})").question, "q");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":null})").question, "q");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":""})").question, "q");
  // Only None and "" fall back (`ins is None or ins == ""`); other falsy values render.
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":0})").question, "0");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":false})").question, "false");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":[]})").question, "[]");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":{"b":1,"a":"x\ny"}})").question, R"({"a":"x\ny","b":1})");
  EXPECT_EQ(render_one(R"({"type":"noul","instructions":"raw \"text\"\n"})").question, "raw \"text\"\n");
}

TEST(Encoder, OptionObjects) {
  // Expected strings: json.dumps({"option_id": id, "description": d}, ...) in CPython.
  auto noul = render_one(R"({"type":"noul","criteria":{"true":"Yes \"really\"","false":null,"other":"x"}})").options;
  EXPECT_EQ(noul, (std::vector<std::string>{R"({"description":"Yes \"really\"","option_id":"true"})",
                                            R"({"option_id":"false"})"}));
  auto choice = render_one(R"({"type":"choice","criteria":{"b":{"z":1,"a":2.50},"a":null,"é":["x"]}})").options;
  EXPECT_EQ(choice, (std::vector<std::string>{R"({"option_id":"a"})", R"({"description":{"a":2.5,"z":1},"option_id":"b"})",
                                              "{\"description\":[\"x\"],\"option_id\":\"\xc3\xa9\"}"}));
  auto score = render_one(R"({"type":"score","criteria":["", 1e16, null, false]})").options;
  EXPECT_EQ(score, (std::vector<std::string>{R"({"description":"","option_id":"0"})",
                                             R"({"description":1e+16,"option_id":"1"})", R"({"option_id":"2"})",
                                             R"({"description":false,"option_id":"3"})"}));
}

TEST(Encoder, StateRendering) {
  ByteTokenizer tok;
  auto r = parse_decision_request(R"({"model":"m","state":{"b":[1,-0.0,1e-05],"a":"\u2028"},"questions":{"q":{"type":"noul"}}})");
  std::string text = tok.decode(encode_request(r, tok).input_ids);
  EXPECT_NE(text.find("STATE:\n{\"a\":\"\u2028\",\"b\":[1,-0.0,1e-05]}\n\nSCHEMA FIELDS:\n"), std::string::npos);
}

TEST(Encoder, TruncatesTheStateHeadAndShiftsSpans) {
  ByteTokenizer tok;
  auto r = parse_decision_request(R"({"model":"m","state":"0123456789","questions":{"q":{"type":"noul"}}})");
  EncodedRequest full = encode_request(r, tok);
  const int64_t fixed = static_cast<int64_t>(full.input_ids.size()) - 10;
  EncodeOptions o;
  o.max_length = fixed + 4;
  EncodedRequest cut = encode_request(r, tok, o);
  EXPECT_EQ(static_cast<int64_t>(cut.input_ids.size()), fixed + 4);
  EXPECT_EQ(cut.state_tokens, 4);
  EXPECT_EQ(cut.truncated_state_tokens, 6);
  EXPECT_NE(tok.decode(cut.input_ids).find("STATE:\n0123\n\nSCHEMA"), std::string::npos);
  EXPECT_EQ(cut.questions[0].question_span.first, full.questions[0].question_span.first - 6);
  EXPECT_EQ(cut.questions[0].option_spans[1].second, full.questions[0].option_spans[1].second - 6);

  o.max_length = fixed;  // no room for the state at all: allowed
  EXPECT_EQ(encode_request(r, tok, o).state_tokens, 0);
  o.max_length = fixed - 1;
  try {
    encode_request(r, tok, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_EQ(std::string(e.what()),
              "schema requires " + std::to_string(fixed) + " tokens before state; maximum is " + std::to_string(fixed - 1));
  }

  EncodeOptions s;
  s.max_state_tokens = 3;
  EncodedRequest three = encode_request(r, tok, s);
  EXPECT_EQ(three.state_tokens, 3);
  EXPECT_EQ(three.truncated_state_tokens, 7);
  s.max_state_tokens = -1;
  EXPECT_THROW(encode_request(r, tok, s), Error);
}

class FixedMedia : public MediaEncoder {
 public:
  std::vector<int32_t> encode_media(const DecisionRequest& request, EncodedMedia* media) const override {
    media->image_grid_thw.push_back({1, 2, 2});
    media->mm_token_type_ids = {0, 1, 0, 0};
    return {1000, 1001, 1002, 1003};
  }
};

TEST(Encoder, MediaGoesAfterThePrefix) {
  ByteTokenizer tok;
  auto r = parse_decision_request(
      R"({"model":"m","state":"S","questions":{"q":{"type":"noul"}},"images":["data:image/png;base64,aGk="]})");
  try {
    encode_request(r, tok);
    FAIL() << "images without a media encoder must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("images"), std::string::npos);
  }
  FixedMedia media;
  EncodedRequest with = encode_request(r, tok, {}, &media);
  auto plain = r;
  plain.images.clear();
  EncodedRequest without = encode_request(plain, tok);
  ASSERT_TRUE(with.media.has_value());
  const int64_t prefix = with.media->token_offset;
  EXPECT_EQ(tok.decode(std::vector<int32_t>(with.input_ids.begin(), with.input_ids.begin() + prefix)),
            tok.decode(std::vector<int32_t>(without.input_ids.begin(), without.input_ids.begin() + prefix)));
  EXPECT_TRUE(tok.decode(std::vector<int32_t>(with.input_ids.begin(), with.input_ids.begin() + prefix)).ends_with("STATE:\n"));
  EXPECT_EQ(std::vector<int32_t>(with.input_ids.begin() + prefix, with.input_ids.begin() + prefix + 4),
            (std::vector<int32_t>{1000, 1001, 1002, 1003}));
  EXPECT_EQ(with.input_ids.size(), without.input_ids.size() + 4);
  EXPECT_EQ(with.questions[0].question_span.first, without.questions[0].question_span.first + 4);
  EXPECT_EQ(with.media->mm_token_type_ids.size(), 4u);
}

}  // namespace
}  // namespace stave
