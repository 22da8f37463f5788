// The tokenizer's parts against their oracles: the fast merge loop against the plain one, the
// NFC shortcut against utf8proc, the regex translation against Oniguruma's documented classes,
// lossy UTF-8 against the Unicode Standard's maximal-subpart rule.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "stave/errors.h"
#include "test_util.h"
#include "text/bpe_byte_level.h"
#include "text/bpe_model.h"
#include "text/bpe_word_cache.h"
#include "text/pretokenize_regex.h"
#include "text/tokenizer_json.h"
#include "text/tokenizer_nfc_unicode9.h"
#include "text/tokenizer_unicode.h"
#include "util/mapped_file.h"

namespace stave::tok {
namespace {

constexpr const char* kTokenizerJson = "public/model-bf16/tokenizer.json";

std::string utf8(char32_t cp) {
  std::string s;
  append_utf8(cp, s);
  return s;
}

class QwenBpeModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(test::fixture(kTokenizerJson))) return;
    TokenizerSpec spec = parse_tokenizer_json(read_file(test::fixture(kTokenizerJson)), "tokenizer.json");
    model_ = new BpeModel(std::move(spec.bpe), "tokenizer.json");
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override { STAVE_REQUIRE_FIXTURE(kTokenizerJson); }

  void expect_same(const std::string& word) {
    std::vector<int32_t> fast, reference, cached, cached_again;
    model_->encode_word_uncached(word, fast, false);
    model_->encode_word_uncached(word, reference, true);
    model_->encode_word(word, cached);
    model_->encode_word(word, cached_again);
    ASSERT_EQ(fast, reference) << "word of " << word.size() << " bytes";
    ASSERT_EQ(cached, reference);
    ASSERT_EQ(cached_again, reference);
  }

  static BpeModel* model_;
};
BpeModel* QwenBpeModel::model_ = nullptr;

TEST_F(QwenBpeModel, FastMergeEqualsReferenceOnRandomWords) {
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabets[] = {
      {"a", "b", "e", "n", "r", "s", "t", " ", "in", "er"},                  // merges galore
      {"\xE4\xB8\xAD", "\xE6\x96\x87", "\xE5\xAD\x97", "\xE7\xAC\xA6"},      // CJK
      {" ", "\n", "\t", "\r"},                                               // whitespace runs
      {"{", "\"", ":", "}", ",", "[", "]", "0", "1"},                        // JSON
      {"\xF0\x9F\x99\x82", "\xE2\x80\x8D", "\xF0\x9F\x91\xA9", "\xC3\xA9"},  // emoji, ZWJ, é
  };
  for (const auto& alphabet : alphabets) {
    for (int n = 0; n < 150; ++n) {
      // Lengths both sides of the short-word limit (48 symbols) and well past it.
      const int pieces = 1 + int(rng() % (n < 100 ? 60 : 400));
      std::string word;
      for (int k = 0; k < pieces; ++k) word += alphabet[rng() % alphabet.size()];
      expect_same(word);
    }
  }
  for (int n = 0; n < 300; ++n) {  // arbitrary bytes, invalid UTF-8 included: BPE does not care
    std::string word(1 + rng() % 120, '\0');
    for (char& c : word) c = char(rng() % 256);
    expect_same(word);
  }
  expect_same(std::string(1000, 'a'));
  expect_same(std::string(777, ' '));
}

TEST_F(QwenBpeModel, KnownWordsAreSingleTokens) {
  // Ids read from the file's vocabulary by hand: "Hello" 9707, "Ġworld" (" world") 1879.
  std::vector<int32_t> ids;
  model_->encode_word("Hello", ids);
  model_->encode_word(" world", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{9707, 1879}));
}

// HF's NFC, spelled plainly: characters that HF's Unicode 9.0 tables do not know stand alone
// (plain starters for HF), and utf8proc normalizes the runs between them.
std::string hf_nfc_reference(std::string_view s) {
  std::string out, run;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t cp = decode_utf8_at(s, i, len);
    if (hf_nfc_knows(cp)) {
      run.append(s.substr(i, len));
    } else {
      out += to_nfc_full(run);
      run.clear();
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out + to_nfc_full(run);
}

TEST(TokenizerUnicode, NfcFollowsHuggingFaceUnicode9Tables) {
  // Outputs of HF tokenizers 0.23.2 (its npm binding), read back from the ids: marks that
  // Unicode 10-14 added are plain starters for HF, so nothing reorders or composes around them.
  EXPECT_EQ(to_nfc("\u0308\u1ABF"), "\u0308\u1ABF");            // U+1ABF: ccc 220 since 14.0
  EXPECT_EQ(to_nfc("a\u1ABF\u0308"), "a\u1ABF\u0308");          // blocks a + U+0308
  EXPECT_EQ(to_nfc("a\u0308\u1ABF"), "\u00E4\u1ABF");
  EXPECT_EQ(to_nfc("e\u0301\u1ABF"), "\u00E9\u1ABF");
  EXPECT_EQ(to_nfc("\u0316\u1DF6"), "\u0316\u1DF6");            // U+1DF6: 10.0
  EXPECT_EQ(to_nfc("\u1DF6\u0316"), "\u1DF6\u0316");
  EXPECT_EQ(to_nfc("\u0301\u0898"), "\u0301\u0898");            // U+0898: 14.0
  EXPECT_EQ(to_nfc("\U00011935\U00011930"), "\U00011935\U00011930");  // Dives Akuru O (13.0): not composed
  EXPECT_EQ(to_nfc("\u1AB0\u0316"), "\u0316\u1AB0");            // U+1AB0 is 7.0: reordered
  EXPECT_TRUE(hf_nfc_knows(0x301));
  EXPECT_TRUE(hf_nfc_knows(0xE9));
  EXPECT_TRUE(hf_nfc_knows(0xAC00));
  EXPECT_FALSE(hf_nfc_knows(0x1ABF));
  EXPECT_FALSE(hf_nfc_knows(0x11930));
}

TEST(TokenizerUnicode, PiecewiseNfcEqualsTheReference) {
  // Every single code point.
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string s = utf8(cp);
    ASSERT_EQ(to_nfc(s), hf_nfc_reference(s)) << "U+" << std::hex << uint32_t(cp);
    if (nfc_inert(cp) && hf_nfc_knows(cp)) {
      ASSERT_EQ(to_nfc_full(s), s) << "U+" << std::hex << uint32_t(cp);
    }
  }
  // Random strings over every code point that utf8proc would touch (non-inert, or unknown to
  // HF's tables) and a spread of inert ones (letters that compose with marks, Hangul syllables
  // and jamo, kana and their voicing marks, CJK, emoji).
  std::vector<char32_t> pool;
  for (char32_t cp = 0; cp < 0x30000; ++cp)
    if (!(cp >= 0xD800 && cp <= 0xDFFF) && (!nfc_inert(cp) || to_nfc_full(utf8(cp)) != utf8(cp) ||
                                            utf8proc_get_property(int32_t(cp))->combining_class != 0))
      pool.push_back(cp);
  ASSERT_GT(pool.size(), 1000u);
  const size_t non_inert = pool.size();
  for (char32_t cp : {U'a', U'e', U'A', U'o', U'u', U' ', U'.', U'\n', char32_t(0xE9), char32_t(0x3B1), char32_t(0x915),
                      char32_t(0x928), char32_t(0xB95), char32_t(0x1100), char32_t(0xAC00), char32_t(0xAC01),
                      char32_t(0x304B), char32_t(0x30AB), char32_t(0x4E2D), char32_t(0x1F642), char32_t(0x200D),
                      char32_t(0xFE0F)})
    pool.push_back(cp);
  std::mt19937 rng(7);
  for (int n = 0; n < 100000; ++n) {
    std::string s;
    const int len = 1 + int(rng() % 7);
    for (int k = 0; k < len; ++k) {
      // Half the draws from the non-inert part, half from the hand-picked inert ones.
      const size_t idx = (rng() & 1) ? rng() % non_inert : non_inert + rng() % (pool.size() - non_inert);
      s += utf8(pool[idx]);
    }
    ASSERT_EQ(to_nfc(s), hf_nfc_reference(s)) << nlohmann::json(s).dump();
  }
  EXPECT_TRUE(nfc_inert(U'e'));
  EXPECT_TRUE(nfc_inert(0xE9));     // é: precomposed, NFC keeps it
  EXPECT_TRUE(nfc_inert(0xAC00));   // 가
  EXPECT_TRUE(nfc_inert(0x4E2D));   // 中
  EXPECT_FALSE(nfc_inert(0x301));   // combining acute (ccc 230)
  EXPECT_FALSE(nfc_inert(0x1161));  // Hangul vowel jamo: composes with a leading jamo
  EXPECT_FALSE(nfc_inert(0x3099));  // kana voicing mark
  EXPECT_FALSE(nfc_inert(0x212B));  // ANGSTROM SIGN: NFC gives U+00C5
  EXPECT_FALSE(nfc_inert(0x0BBE));  // Tamil vowel sign AA: ccc 0, but composes with U+0BC6
  EXPECT_EQ(to_nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(to_nfc("\xEA\xB0\x80"), "\xEA\xB0\x80");              // 가 stays
  EXPECT_EQ(to_nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");  // jamo ᄀ + ᅡ compose to 가
  EXPECT_EQ(to_nfc("x \xE2\x84\xAB y"), "x \xC3\x85 y");          // Å sign -> Å
  EXPECT_EQ(to_nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(TokenizerUnicode, Utf8Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii, long enough to use the 8-byte path"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x99\x82 \xF4\x8F\xBF\xBF"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("abcdefgh\x80"), 8u);
  EXPECT_EQ(find_invalid_utf8("ab\xC1\xBF"), 2u);          // overlong
  EXPECT_EQ(find_invalid_utf8("ab\xE0\x9F\xBF"), 2u);      // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("ab\xED\xBF\xBF"), 2u);      // surrogate U+DFFF
  EXPECT_EQ(find_invalid_utf8("ab\xF4\x90\x80\x80"), 2u);  // past U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ab\xF0\x9F\x99"), 2u);      // truncated
}

TEST(TokenizerUnicode, LossyDecodingReplacesMaximalSubparts) {
  auto lossy = [](std::string_view s) {
    std::string out;
    append_utf8_lossy(s, out);
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  // The Unicode Standard, §3.9 (U+FFFD substitution of maximal subparts), and Rust's docs.
  EXPECT_EQ(lossy("Hello \xF0\x90\x80World"), "Hello " + r + "World");
  EXPECT_EQ(lossy("\xC0\xAF"), r + r);
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(lossy("a\xE2\x82"), "a" + r);
  EXPECT_EQ(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"), "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(lossy("ok \xC3\xA9"), "ok \xC3\xA9");
}

TEST(TokenizerUnicode, WhiteSpaceAndWordClasses) {
  for (char32_t cp : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                      0x205F, 0x3000})
    EXPECT_TRUE(is_white_space(cp)) << std::hex << uint32_t(cp);
  for (char32_t cp : {0x00, 0x1C, 0x180E, 0x200B, 0xFEFF, 0x41})
    EXPECT_FALSE(is_white_space(cp)) << std::hex << uint32_t(cp);
  for (char32_t cp : {0x41, 0x5F, 0x30, 0xE9, 0x301, 0x4E2D, 0x0663, 0x2160, 0x203F, 0x200D, 0x24B6})
    EXPECT_TRUE(is_word_char(cp)) << std::hex << uint32_t(cp);
  for (char32_t cp : {0x20, 0x2D, 0x21, 0x1F642, 0x00BD})  // ½ is No, not Nd/Nl
    EXPECT_FALSE(is_word_char(cp)) << std::hex << uint32_t(cp);
}

TEST(TokenizerByteLevel, Gpt2ByteTable) {
  // GPT-2's table: printable Latin-1 bytes spell themselves, space is Ġ (U+0120), newline Ċ
  // (U+010A), tab ĉ (U+0109), and the soft hyphen, last of the 68 others, U+0143.
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode(0xE9), char32_t(0xE9));
  EXPECT_EQ(byte_to_unicode(' '), char32_t(0x120));
  EXPECT_EQ(byte_to_unicode('\n'), char32_t(0x10A));
  EXPECT_EQ(byte_to_unicode('\t'), char32_t(0x109));
  EXPECT_EQ(byte_to_unicode(0x00), char32_t(0x100));
  EXPECT_EQ(byte_to_unicode(0x7F), char32_t(0x121));
  EXPECT_EQ(byte_to_unicode(0xAD), char32_t(0x143));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(byte_from_unicode(byte_to_unicode(uint8_t(b))), b);
  EXPECT_EQ(byte_from_unicode(0x144), -1);
  EXPECT_EQ(byte_from_unicode(0x4E2D), -1);
  EXPECT_EQ(byte_level_token_bytes("\xC4\xA0world"), " world");
  // A token with a character outside the table decodes to its own UTF-8 (HF's ByteLevel).
  EXPECT_EQ(byte_level_token_bytes("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
}

TEST(TokenizerRegexTranslation, OnigurumaClassesKeepTheirMeaning) {
  auto pieces = [](std::string_view pattern, std::string_view text) {
    SplitRegex re(pattern, true);
    std::vector<std::pair<size_t, size_t>> spans;
    re.split(text, 0, spans);
    std::vector<std::string> out;
    for (auto [b, e] : spans) out.emplace_back(text.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  // Letters, marks and digits that Unicode 15-16 added (Oniguruma 6.9.10 knows them).
  EXPECT_EQ(pieces(R"(\p{L}+)", "a\u1C89b c"), (V{"a\u1C89b", " ", "c"}));           // U+1C89 (16.0)
  EXPECT_EQ(pieces(R"(\p{L}+)", "x\U0002EBF0y!"), (V{"x\U0002EBF0y", "!"}));        // CJK Ext. I (15.1)
  EXPECT_EQ(pieces(R"([^\p{L}]+)", "\u1C89!"), (V{"\u1C89", "!"}));
  EXPECT_EQ(pieces(R"(\P{L}+)", "\u1C89!"), (V{"\u1C89", "!"}));
  EXPECT_EQ(pieces(R"(\p{^L}+)", "\u1C89!"), (V{"\u1C89", "!"}));
  EXPECT_EQ(pieces(R"(\p{M}+)", "a\u0897b"), (V{"a", "\u0897", "b"}));              // ARABIC PEPET (16.0)
  EXPECT_EQ(pieces(R"(\p{N}+)", "a\U00011F50b"), (V{"a", "\U00011F50", "b"}));      // KAWI DIGIT ZERO (15.0)
  EXPECT_EQ(pieces(R"(\d+)", "a\U00011F50\u0663b"), (V{"a", "\U00011F50\u0663", "b"}));
  EXPECT_EQ(pieces(R"(\D+)", "a\U00011F50b"), (V{"a", "\U00011F50", "b"}));
  // \d is any decimal digit, Arabic-Indic included.
  EXPECT_EQ(pieces(R"(\d+)", "x\u0663\u0664y"), (V{"x", "\u0663\u0664", "y"}));
  // Oniguruma \h is a hexadecimal digit, not horizontal space.
  EXPECT_EQ(pieces(R"(\h+)", "beef zz"), (V{"beef", " zz"}));
  EXPECT_EQ(pieces(R"(\H+)", "beef zz"), (V{"beef", " zz"}));
  // \s inside a class, \S outside.
  EXPECT_EQ(pieces(R"([\s,]+)", "a, \u3000b"), (V{"a", ", \u3000", "b"}));
  EXPECT_EQ(pieces(R"(\S+)", "a\u180Eb c"), (V{"a\u180Eb", " ", "c"}));
  // A literal String pattern is not a regex.
  {
    SplitRegex re("a.b", false);
    std::vector<std::pair<size_t, size_t>> spans;
    re.split("xa.bya+b", 0, spans);
    EXPECT_EQ(spans, (std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 4}, {4, 8}}));
  }
  EXPECT_THROW(SplitRegex(R"([^\S])", true), Error);   // negated class inside a class
  EXPECT_THROW(SplitRegex(R"(\bx)", true), Error);      // word boundary
  EXPECT_THROW(SplitRegex(R"(\w+)", true), Error);      // Oniguruma's \w has no exact PCRE2 spelling
  EXPECT_THROW(SplitRegex(R"([^\P{L}])", true), Error); // negated property inside a class
  EXPECT_THROW(SplitRegex(R"((?m)a.)", true), Error);   // Ruby's (?m) is dotall
  EXPECT_THROW(SplitRegex(R"([a&&b])", true), Error);   // class intersection
  EXPECT_THROW(SplitRegex(R"((a)", true), Error);       // does not compile
}

TEST(TokenizerWordCache, ReturnsWhatWasStoredAndNothingElse) {
  BpeWordCache cache(64, 16);
  std::vector<int32_t> out;
  for (int i = 0; i < 5000; ++i) {
    const std::string w = std::to_string(i) + "w";
    const int32_t ids[2] = {i, -i};
    cache.insert(w, BpeWordCache::hash(w), ids, 2);
    EXPECT_LE(cache.size(), 64u + 16u);
    out.clear();
    ASSERT_TRUE(cache.find(w, BpeWordCache::hash(w), out));  // the latest insert is always there
    EXPECT_EQ(out, (std::vector<int32_t>{i, -i}));
  }
  // Whatever survived the collisions is exact: a word finds only its own ids.
  size_t hits = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string w = std::to_string(i) + "w";
    out.clear();
    if (cache.find(w, BpeWordCache::hash(w), out)) {
      ++hits;
      EXPECT_EQ(out, (std::vector<int32_t>{i, -i}));
    }
  }
  EXPECT_GT(hits, 0u);
  EXPECT_LE(hits, 64u);
  // Long words go to the other table and work the same.
  const std::string long_ok(100, 'y');
  const int32_t three[3] = {1, 2, 3};
  cache.insert(long_ok, BpeWordCache::hash(long_ok), three, 3);
  out.clear();
  ASSERT_TRUE(cache.find(long_ok, BpeWordCache::hash(long_ok), out));
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));
  // Too long, or too many ids: not stored.
  const std::string long_word(BpeWordCache::kMaxWordBytes + 1, 'x');
  const int32_t ids[BpeWordCache::kMaxIds + 1] = {};
  cache.insert(long_word, BpeWordCache::hash(long_word), ids, 1);
  EXPECT_FALSE(cache.find(long_word, BpeWordCache::hash(long_word), out));
  cache.insert("many", BpeWordCache::hash("many"), ids, BpeWordCache::kMaxIds + 1);
  EXPECT_FALSE(cache.find("many", BpeWordCache::hash("many"), out));
  // A word that is a prefix of a cached one, or shares its hash slot, is a miss.
  cache.insert("prefix", BpeWordCache::hash("prefix"), ids, 1);
  EXPECT_FALSE(cache.find("prefi", BpeWordCache::hash("prefi"), out));
}

}  // namespace
}  // namespace stave::tok
