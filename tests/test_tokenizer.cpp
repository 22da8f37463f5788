// The tokenizer against Hugging Face: the 300 fixture strings (ids from Python `tokenizers`),
// round trips, added-token edge cases, the Qwen3.5 regex variant, and refusals.
#include "text/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "test_util.h"
#include "text/tokenizer_unicode.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

constexpr const char* kTokenizerJson = "public/model-bf16/tokenizer.json";
constexpr const char* kStringsJson = "public/tokenizer/strings.json";

// The Qwen3.5 pre-tokenizer regex (/work/shared/spec/qwen35.md §5), spelled here by hand.
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A small byte-level tokenizer.json with the real file's pipeline but only the 256 byte tokens
// and no merges: enough to check pre-tokenization and refusals quickly.
nlohmann::json small_tokenizer_json(const std::string& pattern) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  // GPT-2's byte alphabet, built independently of the library's table.
  std::vector<int> bs;
  for (int c = '!'; c <= '~'; ++c) bs.push_back(c);
  for (int c = 0xA1; c <= 0xAC; ++c) bs.push_back(c);
  for (int c = 0xAE; c <= 0xFF; ++c) bs.push_back(c);
  std::vector<int> cs = bs;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + extra++);
    }
  }
  for (size_t i = 0; i < bs.size(); ++i) {
    std::string s;
    tok::append_utf8(char32_t(cs[i]), s);
    vocab[s] = id++;
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 256}, {"content", "<|im_end|>"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
         {"normalized", false}, {"special", true}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
}

std::unique_ptr<Tokenizer> load(const nlohmann::json& j) { return Tokenizer::from_json(j.dump(), "test.json"); }

// The Qwen3 regex as the fixture file spells it.
std::string qwen3_pattern() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

class QwenTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(test::fixture(kTokenizerJson))) return;
    tokenizer_ = Tokenizer::from_file(test::fixture(kTokenizerJson)).release();
    raw_json_ = new nlohmann::json(test::read_json(test::fixture(kTokenizerJson)));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete raw_json_;
    tokenizer_ = nullptr;
    raw_json_ = nullptr;
  }
  void SetUp() override { STAVE_REQUIRE_FIXTURE(kTokenizerJson); }

  // An id read straight from the file's vocabulary (not through the tokenizer).
  static int32_t vocab_id(const std::string& token) { return (*raw_json_)["model"]["vocab"].at(token).get<int32_t>(); }

  static Tokenizer* tokenizer_;
  static nlohmann::json* raw_json_;
};
Tokenizer* QwenTokenizer::tokenizer_ = nullptr;
nlohmann::json* QwenTokenizer::raw_json_ = nullptr;

TEST_F(QwenTokenizer, FileIsTheExpectedQwen3Tokenizer) {
  EXPECT_EQ((*raw_json_)["model"]["vocab"].size(), 151643u);
  EXPECT_EQ((*raw_json_)["added_tokens"].size(), 26u);
  EXPECT_EQ(tokenizer_->vocab_size(), 151669);
  EXPECT_EQ(tokenizer_->token_to_id("<|im_end|>"), std::optional<int32_t>(151645));
  EXPECT_EQ(tokenizer_->token_to_id("Hello"), std::optional<int32_t>(vocab_id("Hello")));
  EXPECT_EQ(tokenizer_->token_to_id("no such token"), std::nullopt);
}

TEST_F(QwenTokenizer, MatchesHuggingFaceOnAllFixtureStrings) {
  STAVE_REQUIRE_FIXTURE(kStringsJson);
  const nlohmann::json cases = test::read_json(test::fixture(kStringsJson));
  ASSERT_EQ(cases.size(), 300u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"].get<std::string>();
    const std::vector<int32_t> expected = cases[i]["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tokenizer_->encode(text);
    if (got != expected) {
      ++failures;
      ADD_FAILURE() << "string " << i << " " << nlohmann::json(text).dump() << "\n  expected "
                    << nlohmann::json(expected).dump() << "\n  got      " << nlohmann::json(got).dump();
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_F(QwenTokenizer, DecodeOfEncodeIsTheNfcText) {
  STAVE_REQUIRE_FIXTURE(kStringsJson);
  const nlohmann::json cases = test::read_json(test::fixture(kStringsJson));
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"].get<std::string>();
    EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text)), tok::to_nfc_full(text)) << "string " << i;
  }
}

TEST_F(QwenTokenizer, DecodesTheFixtureIds) {
  STAVE_REQUIRE_FIXTURE(kStringsJson);
  const nlohmann::json cases = test::read_json(test::fixture(kStringsJson));
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(tokenizer_->decode(cases[i]["ids"].get<std::vector<int32_t>>()),
              tok::to_nfc_full(cases[i]["text"].get<std::string>()))
        << "string " << i;
}

TEST_F(QwenTokenizer, SpecialTokenGluedToText) {
  const int32_t im_end = 151645, im_start = 151644;
  EXPECT_EQ(tokenizer_->encode("Hello<|im_end|>hello"),
            (std::vector<int32_t>{vocab_id("Hello"), im_end, vocab_id("hello")}));
  EXPECT_EQ(tokenizer_->encode("<|im_start|>Hello"), (std::vector<int32_t>{im_start, vocab_id("Hello")}));
  // The space after a special token starts the next piece (" world" is one word).
  EXPECT_EQ(tokenizer_->encode("<|im_end|> world"), (std::vector<int32_t>{im_end, vocab_id("Ġworld")}));
  EXPECT_EQ(tokenizer_->pre_tokenize("a<|im_end|>b"), (std::vector<std::string>{"a", "<|im_end|>", "b"}));
}

TEST_F(QwenTokenizer, AdjacentSpecialTokens) {
  EXPECT_EQ(tokenizer_->encode("<|im_end|><|im_end|>"), (std::vector<int32_t>{151645, 151645}));
  EXPECT_EQ(tokenizer_->encode("<|im_start|><think></think><|endoftext|>"),
            (std::vector<int32_t>{151644, 151667, 151668, 151643}));
  // The image placeholder run of a vision prompt.
  EXPECT_EQ(tokenizer_->encode("<|vision_start|><|image_pad|><|image_pad|><|vision_end|>"),
            (std::vector<int32_t>{151652, 151655, 151655, 151653}));
}

TEST_F(QwenTokenizer, PartialSpecialTokenTextIsPlainText) {
  // "<|im_end" (no closing "|>") is ordinary text: "<|" punctuation, "im" letters, "_end".
  EXPECT_EQ(tokenizer_->pre_tokenize("<|im_end"), (std::vector<std::string>{"<|", "im", "_end"}));
  const std::vector<int32_t> ids = tokenizer_->encode("<|im_end");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151645), 0);
  EXPECT_EQ(tokenizer_->decode(ids), "<|im_end");
  EXPECT_EQ(ids.back(), vocab_id("_end"));
  // A complete token right after a partial one is still found.
  EXPECT_EQ(tokenizer_->pre_tokenize("<|im_start<|im_end|>"),
            (std::vector<std::string>{"<|", "im", "_start", "<|im_end|>"}));
  // Case matters: added tokens are matched exactly.
  const std::vector<int32_t> upper = tokenizer_->encode("<|IM_END|>");
  EXPECT_EQ(std::count(upper.begin(), upper.end(), 151645), 0);
}

TEST_F(QwenTokenizer, DecodePrintsAddedTokensAndRefusesUnknownIds) {
  EXPECT_EQ(tokenizer_->decode({151644, vocab_id("Hello"), 151645}), "<|im_start|>Hello<|im_end|>");
  EXPECT_EQ(tokenizer_->decode({vocab_id("Ġworld")}), " world");
  EXPECT_EQ(tokenizer_->decode({}), "");
  try {
    tokenizer_->decode({200000});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_NE(std::string(e.what()).find("200000"), std::string::npos);
  }
  EXPECT_THROW(tokenizer_->decode({-1}), Error);
  // A lone byte of a multi-byte character decodes to U+FFFD (Rust's from_utf8_lossy).
  const std::vector<int32_t> e_acute = tokenizer_->encode("\xC3\xA9");  // é
  ASSERT_EQ(e_acute.size(), 1u);
  const int32_t c3 = vocab_id("\xC3\x83");  // byte 0xC3 spelled as U+00C3
  EXPECT_EQ(tokenizer_->decode({c3}), "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer_->decode({c3, vocab_id("\xC2\xA9")}), "\xC3\xA9");  // 0xC3 0xA9 = é
}

TEST_F(QwenTokenizer, InvalidUtf8IsAnInvalidRequest) {
  for (const std::string& bad : {std::string("\xFF"), std::string("abc\xC3"), std::string("\xED\xA0\x80"),
                                std::string("\xC0\xAF"), std::string("\xF4\x90\x80\x80"), std::string("ok\x80")}) {
    try {
      tokenizer_->encode(bad);
      ADD_FAILURE() << "no error for " << nlohmann::json::binary({bad.begin(), bad.end()}).dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
      EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos);
    }
  }
  EXPECT_EQ(tokenizer_->encode(""), std::vector<int32_t>{});
  EXPECT_EQ(tokenizer_->encode(std::string("a\0b", 3)).size(), 3u);  // NUL is valid text
}

TEST_F(QwenTokenizer, ConcurrentEncodesAgree) {
  STAVE_REQUIRE_FIXTURE(kStringsJson);
  const nlohmann::json cases = test::read_json(test::fixture(kStringsJson));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t i = size_t(t); i < cases.size(); i += 1)
          if (tokenizer_->encode(cases[i]["text"].get<std::string>()) != cases[i]["ids"].get<std::vector<int32_t>>())
            ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(QwenTokenizer, LongInputs) {
  // One 200 KB word and one 100 KB run of spaces: the heap merge and the regex on long pieces.
  const std::string letters(200000, 'a');
  const std::vector<int32_t> ids = tokenizer_->encode(letters);
  EXPECT_LT(ids.size(), letters.size() / 2);
  EXPECT_EQ(tokenizer_->decode(ids), letters);
  const std::string spaces = std::string(100000, ' ') + "x";
  EXPECT_EQ(tokenizer_->pre_tokenize(spaces).size(), 2u);  // " "*99999 then " x"
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(spaces)), spaces);
}

// Ids from HF tokenizers 0.23.2 (its npm binding, the same Rust code as Python's `tokenizers`)
// on text where Unicode versions matter: HF's regex engine knows Unicode 16 (U+1C89 and CJK
// Extension I are letters), its NFC tables are Unicode 9 (later marks neither reorder nor
// compose), and U+180E is not white space.
TEST_F(QwenTokenizer, MatchesHuggingFaceWhereUnicodeVersionsDiffer) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"!\u1C89't", {0, 128233, 231, 944}},
      {"x\U0002EBF0'll", {87, 172, 106, 107, 108, 3278}},
      {"\u0308\u1ABF\u0315!", {136, 230, 157, 103, 123, 136, 243, 0}},
      {"a\u1ABF\u0308", {64, 157, 103, 123, 136, 230}},
      {"e\u0301\u1DF6 ok", {963, 157, 115, 114, 5394}},
      {"\U00011935\U00011930", {128240, 97, 113, 128240, 97, 108}},
      {"\u3000\u180E!\u0085'S", {22441, 123970, 236, 0, 126, 227, 13272}},
      {"\U00011350\u0663\U00011F50", {128240, 235, 238, 149, 96, 128240, 121, 238}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(tokenizer_->encode(text), ids) << nlohmann::json(text).dump();
}

// The real file with its pattern swapped for the Qwen3.5 one (\p{M} joins letters). Ids from
// HF tokenizers 0.23.2 on the same swapped file; the Qwen3 ids (also HF's) differ on each.
TEST_F(QwenTokenizer, Qwen35PatternWithTheRealVocabulary) {
  nlohmann::json variant = *raw_json_;
  variant["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = kQwen35Pattern;
  const auto t35 = Tokenizer::from_json(variant.dump(), "qwen35-variant.json");
  const std::vector<std::tuple<std::string, std::vector<int32_t>, std::vector<int32_t>>> cases = {
      // text, Qwen3.5 ids, Qwen3 ids
      {"\u20D9's", {158, 225, 247, 594}, {158, 225, 247, 6, 82}},
      {"\u2007\u034F'S\u3007\u04BA", {378, 229, 137, 237, 13272, 1277, 229, 147871},
       {378, 229, 137, 237, 6, 50, 1277, 229, 147871}},
      {"\u0BBE\\F\u0BE7\u000B", {20026, 122, 10013, 31501, 100, 199}, {20026, 122, 59, 37, 31501, 100, 199}},
      {"\u031C're:\u4E64'\u017Ft", {136, 250, 2299, 25, 17783, 97, 6, 144815, 83},
       {136, 250, 6, 265, 25, 17783, 97, 6, 144815, 83}},
  };
  for (const auto& [text, ids35, ids3] : cases) {
    EXPECT_EQ(t35->encode(text), ids35) << nlohmann::json(text).dump();
    EXPECT_EQ(tokenizer_->encode(text), ids3) << nlohmann::json(text).dump();
  }
  // Marks stay inside words with the Qwen3.5 pattern.
  EXPECT_EQ(t35->pre_tokenize("\u0939\u093F\u0928\u094D\u0926\u0940 x\u0301y"),
            (std::vector<std::string>{"\u0939\u093F\u0928\u094D\u0926\u0940", " x\u0301y"}));
}

// The pre-tokenizer regex, split by hand. Both variants are loaded from JSON text built like
// the real file, so the pattern goes through the same loading path.
TEST(TokenizerRegex, Qwen3PatternSplits) {
  auto t = load(small_tokenizer_json(qwen3_pattern()));
  using V = std::vector<std::string>;
  EXPECT_EQ(t->pre_tokenize("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(t->pre_tokenize("we've 12 apples!!\n\nok"), (V{"we", "'ve", " ", "1", "2", " apples", "!!\n\n", "ok"}));
  EXPECT_EQ(t->pre_tokenize("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(t->pre_tokenize("x  "), (V{"x", "  "}));
  EXPECT_EQ(t->pre_tokenize("I'LL"), (V{"I", "'LL"}));  // (?i:'ll)
  // Marks are not letters here: the Devanagari word falls apart at its vowel signs.
  EXPECT_EQ(t->pre_tokenize("हिन्दी"), (V{"ह", "िन", "्द", "ी"}));
  EXPECT_EQ(t->pre_tokenize("x\u0301y"), (V{"x", "\u0301y"}));
  EXPECT_EQ(t->pre_tokenize("x\u0301\n"), (V{"x", "\u0301\n"}));
  // U+0085 (NEL) is \s for Oniguruma, so punctuation stops before it; U+180E is not \s (it is
  // Cf since Unicode 6.3), so punctuation runs through it.
  EXPECT_EQ(t->pre_tokenize("!\u0085"), (V{"!", "\u0085"}));
  EXPECT_EQ(t->pre_tokenize("!\u180E"), (V{"!\u180E"}));
  EXPECT_EQ(t->pre_tokenize("!\u2028"), (V{"!", "\u2028"}));  // LINE SEPARATOR is \s, not [\r\n]
}

TEST(TokenizerRegex, Qwen35MarkVariantSplits) {
  auto t = load(small_tokenizer_json(kQwen35Pattern));
  using V = std::vector<std::string>;
  // Letters and marks form one word.
  EXPECT_EQ(t->pre_tokenize("हिन्दी"), (V{"हिन्दी"}));
  EXPECT_EQ(t->pre_tokenize("x\u0301y"), (V{"x\u0301y"}));
  EXPECT_EQ(t->pre_tokenize("x\u0301\n"), (V{"x\u0301", "\n"}));
  EXPECT_EQ(t->pre_tokenize("A\u20DD"), (V{"A\u20DD"}));  // enclosing mark (Me)
  // a + dot below + diaeresis: NFC composes the first pair (U+1EA1), the diaeresis stays a mark.
  EXPECT_EQ(t->pre_tokenize("a\u0323\u0308!"), (V{"\u1EA1\u0308", "!"}));
  // A space, then a mark-initial word: the optional prefix takes the space.
  EXPECT_EQ(t->pre_tokenize(" \u0301abc"), (V{" \u0301abc"}));
  // The contraction alternative comes first; the stray mark after it is its own word.
  EXPECT_EQ(t->pre_tokenize("'s\u20DD"), (V{"'s", "\u20DD"}));
  // Punctuation stops before a mark (the Qwen3 regex would take "!!\u0301" as one piece).
  EXPECT_EQ(t->pre_tokenize("!!\u0301a"), (V{"!!", "\u0301a"}));
  // Digits stay single; a mark after a digit is a word of its own.
  EXPECT_EQ(t->pre_tokenize("12\u0301"), (V{"1", "2", "\u0301"}));
  // Added tokens are still found first.
  EXPECT_EQ(t->pre_tokenize("x\u0301<|im_end|>y"), (V{"x\u0301", "<|im_end|>", "y"}));
  // Byte-level ids of the small vocabulary: one id per byte, nothing merges.
  EXPECT_EQ(t->encode("x\u0301").size(), 3u);
}

TEST(TokenizerRefusals, UnsupportedPartsAreNamed) {
  auto expect_refused = [](nlohmann::json j, const std::string& needle, ErrorKind kind) {
    try {
      load(j);
      ADD_FAILURE() << "loaded although it has " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const nlohmann::json base = small_tokenizer_json(qwen3_pattern());
  {
    auto j = base;
    j["normalizer"] = {{"type", "NFKC"}};
    expect_refused(j, "NFKC", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
    expect_refused(j, "Lowercase", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["type"] = "WordPiece";
    expect_refused(j, "WordPiece", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}};
    expect_refused(j, "Metaspace", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
    expect_refused(j, "behavior", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["byte_fallback"] = true;
    expect_refused(j, "byte_fallback", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["dropout"] = 0.1;
    expect_refused(j, "dropout", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["continuing_subword_prefix"] = "##";
    expect_refused(j, "continuing_subword_prefix", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["decoder"] = {{"type", "WordPiece"}};
    expect_refused(j, "decoder", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["merges"] = nlohmann::json::array({"a q"});  // "q" is in the vocabulary but "aq" is not
    expect_refused(j, "model.merges[0]", ErrorKind::kInvalidModel);
  }
  {
    auto j = base;
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a|";
    expect_refused(j, "empty string", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "[[:alpha:]]+";
    expect_refused(j, "POSIX", ErrorKind::kUnsupported);
  }
  {
    auto j = base;
    j["model"]["vocab"]["bad"] = -1;
    expect_refused(j, "model.vocab[\"bad\"]", ErrorKind::kInvalidModel);
  }
  {
    auto j = base;
    j["model"]["vocab"] = nlohmann::json::array();
    expect_refused(j, "model.vocab", ErrorKind::kInvalidModel);
  }
  {
    auto j = base;
    j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a"})});
    expect_refused(j, "model.merges[0]", ErrorKind::kInvalidModel);
  }
  {
    auto j = base;
    j["model"]["merges"] = nlohmann::json::array({"a b c"});
    expect_refused(j, "model.merges[0]", ErrorKind::kInvalidModel);
  }
  {
    auto j = base;
    j["model"].erase("merges");
    expect_refused(j, "model.merges", ErrorKind::kInvalidModel);
  }
  expect_refused(nlohmann::json::array(), "top level", ErrorKind::kInvalidModel);
  EXPECT_THROW(Tokenizer::from_json("{not json", "bad.json"), Error);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
}

TEST(TokenizerMerges, BothMergeSpellingsGiveTheSameIds) {
  // "a b" strings and ["a", "b"] pairs are the same merges.
  auto pairs = small_tokenizer_json(qwen3_pattern());
  pairs["model"]["vocab"]["ab"] = 257;
  pairs["model"]["vocab"]["abc"] = 258;
  auto strings = pairs;
  pairs["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"})});
  strings["model"]["merges"] = nlohmann::json::array({"#version: 0.2", "a b", "ab c"});  // header skipped
  const std::vector<int32_t> expected{258, 257};  // "abc" then "ab"
  EXPECT_EQ(load(pairs)->encode("abcab"), expected);
  EXPECT_EQ(load(strings)->encode("abcab"), expected);
}

TEST(TokenizerMerges, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  auto j = small_tokenizer_json(qwen3_pattern());
  j["model"]["vocab"]["ab"] = 257;
  j["model"]["vocab"]["abc"] = 258;  // a token that no merge produces
  j["model"]["merges"] = nlohmann::json::array({"a b"});
  const int32_t c = load(j)->token_to_id("c").value();
  EXPECT_EQ(load(j)->encode("abc"), (std::vector<int32_t>{257, c}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j)->encode("abc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(load(j)->encode("abcab"), (std::vector<int32_t>{257, c, 257}));  // not a token: merges
}

TEST(TokenizerMerges, BytesWithoutATokenBecomeUnkOrVanish) {
  // HF's merge_word: a character missing from the vocabulary becomes unk_token (consecutive ones
  // fused into one with fuse_unk), or is dropped when there is no unk_token.
  auto j = small_tokenizer_json(qwen3_pattern());
  j["model"]["vocab"].erase("z");
  j["model"]["vocab"]["<unk>"] = 300;
  const int32_t a = load(j)->token_to_id("a").value();
  EXPECT_EQ(load(j)->encode("azza"), (std::vector<int32_t>{a, a}));  // no unk_token: dropped
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load(j)->encode("azza"), (std::vector<int32_t>{a, 300, 300, a}));
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(j)->encode("azza"), (std::vector<int32_t>{a, 300, a}));
  j["model"]["unk_token"] = "<missing>";
  EXPECT_THROW(load(j), Error);
}

TEST(TokenizerAddedTokens, FlagsFollowHuggingFace) {
  auto j = small_tokenizer_json(qwen3_pattern());
  j["added_tokens"] = {
      {{"id", 300}, {"content", "[L]"}, {"lstrip", true}, {"rstrip", false}, {"single_word", false},
       {"normalized", false}, {"special", true}},
      {{"id", 301}, {"content", "[R]"}, {"lstrip", false}, {"rstrip", true}, {"single_word", false},
       {"normalized", false}, {"special", true}},
      {{"id", 302}, {"content", "word"}, {"lstrip", false}, {"rstrip", false}, {"single_word", true},
       {"normalized", true}, {"special", false}},
      {{"id", 303}, {"content", "caf\u00E9"}, {"lstrip", false}, {"rstrip", false}, {"single_word", false},
       {"normalized", true}, {"special", false}},
      {{"id", 304}, {"content", "[R]x"}, {"lstrip", false}, {"rstrip", false}, {"single_word", false},
       {"normalized", false}, {"special", true}}};
  auto t = load(j);
  using V = std::vector<std::string>;
  // lstrip takes the spaces before the token into it; rstrip the spaces after.
  EXPECT_EQ(t->pre_tokenize("a  [L]b"), (V{"a", "  [L]", "b"}));
  EXPECT_EQ(t->pre_tokenize("a[R]  b"), (V{"a", "[R]  ", "b"}));
  EXPECT_EQ(t->encode("a  [L]b"), (std::vector<int32_t>{t->token_to_id("a").value(), 300, t->token_to_id("b").value()}));
  // Leftmost-longest: "[R]x" wins over "[R]" at the same start.
  EXPECT_EQ(t->pre_tokenize("[R]xy"), (V{"[R]x", "y"}));
  // single_word: only between non-word characters.
  EXPECT_EQ(t->pre_tokenize("a word."), (V{"a", " ", "word", "."}));
  EXPECT_EQ(t->pre_tokenize("swordfish"), (V{"swordfish"}));
  EXPECT_EQ(t->pre_tokenize("word_x"), (V{"word", "_x"}));  // the regex split, not the token
  EXPECT_EQ(t->encode("word_x").size(), 6u);
  EXPECT_EQ(t->encode("(word)"), (std::vector<int32_t>{t->token_to_id("(").value(), 302, t->token_to_id(")").value()}));
  // normalized=true tokens are found in the NFC text: a decomposed é still matches.
  EXPECT_EQ(t->pre_tokenize("le cafe\u0301!"), (V{"le", " ", "caf\u00E9", "!"}));
  EXPECT_EQ(t->token_to_id("caf\u00E9"), std::optional<int32_t>(303));
  EXPECT_EQ(t->vocab_size(), 305);
}

}  // namespace
}  // namespace stave
