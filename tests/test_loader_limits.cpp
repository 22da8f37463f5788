// The hard limits on every loader of untrusted files (issue 31, item 4): file and header sizes,
// tensor counts, vocabulary and merge counts, nesting depth, string lengths. Each is refused
// with a stave::Error that names the file and the limit, before anything is sized by it.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "io/checksums.h"
#include "io/gguf.h"
#include "io/gguf_reader.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/tensor_store.h"
#include "quantize/calibration.h"
#include "formats/name_match.h"
#include "formats/quark_config.h"
#include "stave/errors.h"
#include "text/tokenizer.h"
#include "text/tokenizer_json.h"
#include "util/json_limits.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

namespace fs = std::filesystem;

// Runs `f`, expecting a stave::Error whose message holds every one of `parts`.
template <typename F>
void expect_refused(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// --- nesting depth and file size, shared by the JSON loaders ---------------------------------

TEST(LoaderLimits, JsonDepthCountsBracketsOutsideStrings) {
  EXPECT_NO_THROW(check_json_depth(nested(kMaxJsonDepth), "x.json"));
  expect_refused([] { check_json_depth(nested(kMaxJsonDepth + 1), "x.json"); }, {"x.json", "nesting deeper than 64"});
  // Brackets inside strings, also after an escaped quote, do not count.
  const std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  EXPECT_NO_THROW(check_json_depth(in_string, "x.json"));
}

TEST(LoaderLimits, ReadFileRefusesAFileOverItsLimit) {
  const fs::path p = fs::path(stave::test::temp_dir()) / "limits-read-file.txt";
  std::ofstream(p) << std::string(101, 'x');
  EXPECT_EQ(read_file(p.string(), 101).size(), 101u);
  expect_refused([&] { read_file(p.string(), 100); }, {p.string(), "101 bytes", "limit of 100"});
}

TEST(LoaderLimits, EveryJsonLoaderRefusesDeepNesting) {
  const std::string deep = "{\"a\": " + nested(200) + "}";
  expect_refused([&] { parse_model_config(deep, "config.json"); }, {"config.json", "nesting deeper"});
  expect_refused([&] { parse_joint_head_config(deep, "joint_head_config.json"); }, {"nesting deeper"});
  expect_refused([&] { parse_image_processor_config(deep, "processor_config.json"); }, {"nesting deeper"});
  expect_refused([&] { quant::QuarkConfig::parse(deep, "quantization_config"); }, {"nesting deeper"});
  expect_refused([&] { parse_safetensors_index(deep, "index.json"); }, {"index.json", "nesting deeper"});
  expect_refused([&] { tok::parse_tokenizer_json(deep, "tokenizer.json"); }, {"tokenizer.json", "nesting deeper"});
  // safetensors: the header JSON.
  std::string header = "{\"__metadata__\": {\"a\": " + nested(100) + "}}";
  std::vector<uint8_t> file(8 + header.size());
  for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  expect_refused([&] { parse_safetensors(file.data(), file.size(), "w.safetensors"); }, {"nesting deeper"});
  // calibration JSONL: per line, as kInvalidRequest naming the line.
  quantize::CalibrationOptions o;
  auto bytes = [](std::string_view s) { return std::vector<int32_t>(s.size(), 1); };
  try {
    quantize::parse_calibration("\"ok\"\n" + nested(100) + "\n", "c.jsonl", true, o, bytes);
    ADD_FAILURE() << "deep calibration line accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    EXPECT_NE(std::string(e.what()).find("c.jsonl line 2"), std::string::npos) << e.what();
  }
}

TEST(LoaderLimits, ConfigFilesHaveASizeLimit) {
  const std::string big = "{\"pad\": \"" + std::string(kMaxConfigBytes, ' ') + "\"}";
  expect_refused([&] { parse_model_config(big, "config.json"); }, {"config.json", "limit of 16777216"});
  expect_refused([&] { quant::QuarkConfig::parse(big, "quantization_config"); }, {"limit of 16777216"});
}

// --- config.json -----------------------------------------------------------------------------

std::string text_config(const std::string& extra) {
  return R"({"model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
  "linear_key_head_dim": 16, "linear_value_head_dim": 16, "vocab_size": 512,
  "mrope_section": [1, 1, 0], )" + extra + "}";
}

TEST(LoaderLimits, ConfigLayerCountsAndDimensions) {
  EXPECT_NO_THROW(parse_model_config(text_config("\"num_hidden_layers\": 1024"), "config.json"));
  expect_refused([] { parse_model_config(text_config("\"num_hidden_layers\": 1025"), "config.json"); },
                 {"num_hidden_layers 1025", "limit of 1024"});
  // layer_types is checked against num_hidden_layers before it is read.
  expect_refused([] { parse_model_config(text_config(R"("num_hidden_layers": 2, "layer_types": ["full_attention"])"),
                                          "config.json"); },
                 {"layer_types has 1 entries"});
  expect_refused([] { parse_model_config(text_config(R"("num_hidden_layers": 4, "partial_rotary_factor": 1e300)"),
                                          "config.json"); },
                 {"partial_rotary_factor must be in (0, 1]"});
  expect_refused([] { parse_model_config(text_config(R"("num_hidden_layers": 4, "linear_num_value_heads": 1073741824,
                                                       "linear_value_head_dim": 1073741824)"),
                                          "config.json"); },
                 {"exceed the limit"});
}

// --- SHA256SUMS ------------------------------------------------------------------------------

TEST(LoaderLimits, ChecksumFileAndNameLengths) {
  const std::string hex(64, 'a');
  EXPECT_EQ(parse_sha256sums(hex + "  " + std::string(kMaxChecksumNameBytes, 'n') + "\n", "SHA256SUMS").size(), 1u);
  expect_refused([&] { parse_sha256sums(hex + "  " + std::string(kMaxChecksumNameBytes + 1, 'n'), "SHA256SUMS"); },
                 {"SHA256SUMS line 1", "longer than 4096"});
  expect_refused([] { parse_sha256sums(std::string(kMaxChecksumsBytes + 1, '\n'), "SHA256SUMS"); },
                 {"SHA256SUMS", "limit of 1048576"});
}

// --- model.safetensors.index.json ------------------------------------------------------------

TEST(LoaderLimits, IndexTensorAndShardCountsAndNames) {
  std::string many = "{\"weight_map\": {";
  for (size_t i = 0; i <= kMaxIndexTensors; ++i) many += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"a\"";
  many += "}}";
  expect_refused([&] { parse_safetensors_index(many, "index.json"); }, {"index.json", "1048577 tensors", "limit"});
  std::string shards = "{\"weight_map\": {";
  for (size_t i = 0; i <= kMaxIndexShards; ++i)
    shards += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"s" + std::to_string(i) + "\"";
  shards += "}}";
  expect_refused([&] { parse_safetensors_index(shards, "index.json"); }, {"more than 10000 shards"});
  const std::string long_name = "{\"weight_map\": {\"" + std::string(kMaxIndexNameBytes + 1, 't') + "\": \"a\"}}";
  expect_refused([&] { parse_safetensors_index(long_name, "index.json"); }, {"longer than 4096"});
  expect_refused([] { parse_safetensors_index(std::string(kMaxIndexBytes + 1, ' '), "index.json"); }, {"limit of 67108864"});
}

// --- GGUF ------------------------------------------------------------------------------------

struct GgufBytes {
  std::vector<uint8_t> b;
  template <typename T>
  GgufBytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& pad(size_t n) {
    b.resize(b.size() + n);
    return *this;
  }
};

GgufBytes gguf_header(uint64_t tensors, uint64_t kv) {
  GgufBytes g;
  g.put<uint32_t>(gguf::kMagic).put<uint32_t>(3).put<uint64_t>(tensors).put<uint64_t>(kv);
  return g;
}

void expect_gguf_refused(const GgufBytes& g, const std::string& what) {
  expect_refused([&] { gguf::parse_layout(g.b.data(), g.b.size(), "m.gguf"); }, {"m.gguf", what});
}

TEST(LoaderLimits, GgufCountsLengthsAndSizes) {
  expect_gguf_refused(gguf_header(gguf::kMaxTensors + 1, 0).pad(64), "more than the limit of 1048576");
  expect_gguf_refused(gguf_header(0, gguf::kMaxMetadata + 1).pad(64), "metadata entries, more than the limit");
  GgufBytes long_key = gguf_header(0, 1);
  long_key.put<uint64_t>(gguf::kMaxStringBytes + 1).pad(64);
  expect_gguf_refused(long_key, "more than the limit of 1048576");
  GgufBytes long_array = gguf_header(0, 1);
  long_array.str("a").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(gguf::kMaxArrayLength + 1).pad(64);
  expect_gguf_refused(long_array, "4194305 elements");
  // 4 dimensions of 2^40 floats: the byte count overflows 64 bits (it once wrapped to a small
  // number that passed the bounds check).
  GgufBytes huge = gguf_header(1, 0);
  huge.str("t").put<uint32_t>(4);
  for (int d = 0; d < 4; ++d) huge.put<uint64_t>(uint64_t{1} << 40);
  huge.put<uint32_t>(0).put<uint64_t>(0).pad(64);
  expect_gguf_refused(huge, "byte size that overflows");
}

// --- tokenizer.json --------------------------------------------------------------------------

std::string tokenizer_json(const std::string& vocab, const std::string& merges, const std::string& added = "[]") {
  return R"({"added_tokens": )" + added + R"(, "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": )" + merges + "}}";
}

TEST(LoaderLimits, TokenizerVocabMergesAndTokenLengths) {
  EXPECT_NO_THROW(Tokenizer::from_json(tokenizer_json(R"({"a": 0, "b": 1, "ab": 2})", R"([["a", "b"]])"), "t.json"));
  // An id is the size of a table: one past the limit is refused, not allocated.
  expect_refused([] { Tokenizer::from_json(tokenizer_json(R"({"a": 1048576})", "[]"), "t.json"); },
                 {"t.json", "not below the limit of 1048576 ids"});
  expect_refused([] { Tokenizer::from_json(tokenizer_json(R"({"a": 2147483647})", "[]"), "t.json"); },
                 {"not below the limit"});
  expect_refused([] {
    Tokenizer::from_json(tokenizer_json("{\"" + std::string(tok::kMaxTokenBytes + 1, 'a') + "\": 0}", "[]"), "t.json");
  }, {"longer than the limit of 1024"});
  expect_refused([] {
    Tokenizer::from_json(tokenizer_json(R"({"a": 0})", "[]", R"([{"id": 1048576, "content": "<x>"}])"), "t.json");
  }, {"added_tokens[0].id"});
  expect_refused([] {
    Tokenizer::from_json(
        tokenizer_json(R"({"a": 0})", "[]", "[{\"id\": 5, \"content\": \"" + std::string(2000, 'x') + "\"}]"), "t.json");
  }, {"added_tokens[0].content is longer"});
  std::string vocab = "{";
  for (size_t i = 0; i <= tok::kMaxVocab; ++i) vocab += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  vocab += "}";
  expect_refused([&] { tok::parse_tokenizer_json(tokenizer_json(vocab, "[]"), "t.json"); },
                 {"model.vocab has more than the limit of 1048576 entries"});
  std::string merges = "[";
  for (size_t i = 0; i <= tok::kMaxMerges; ++i) merges += i ? ",\"a b\"" : "\"a b\"";
  merges += "]";
  expect_refused([&] { tok::parse_tokenizer_json(tokenizer_json(R"({"a": 0})", merges), "t.json"); },
                 {"model.merges has more than the limit of 1048576 entries"});
  expect_refused([] { tok::parse_tokenizer_json(std::string(tok::kMaxTokenizerBytes + 1, ' '), "t.json"); },
                 {"t.json", "limit of 67108864"});
}

// --- regexes in quantization_config exclude / layer_quant_config ----------------------------

TEST(LoaderLimits, RegexBacktrackingIsBoundedAndRefused) {
  const quant::NamePattern p("re:(a+)+$", "exclude[0]");
  EXPECT_TRUE(p.matches("aaaa"));
  EXPECT_FALSE(p.matches("b"));
  // Exponential backtracking: refused naming the pattern, not a silent "no match" nor a hang.
  expect_refused([&] { p.matches(std::string(40, 'a') + "b"); }, {"exclude[0]", "(a+)+$", "cannot be matched"});
}

// --- calibration -----------------------------------------------------------------------------

TEST(LoaderLimits, CalibrationIdsStopAtSeqLen) {
  quantize::CalibrationOptions o;
  o.seq_len = 3;
  auto none = [](std::string_view) { return std::vector<int32_t>(); };
  const auto s = quantize::parse_calibration("{\"input_ids\": [1, 2, 3, 4, 5]}\n", "c.jsonl", true, o, none);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], (std::vector<int32_t>{1, 2, 3}));
  // Every id is still checked past seq_len.
  expect_refused([&] { quantize::parse_calibration("{\"input_ids\": [1, 2, 3, 4, -5]}\n", "c.jsonl", true, o, none); },
                 {"c.jsonl line 1", "-5"});
}

}  // namespace
}  // namespace stave
