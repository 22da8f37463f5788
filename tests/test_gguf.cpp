// GGUF: our writer's files read back by our reader (header, metadata, tensor infos,
// alignment, data), the MXFP4 nibble reordering, and the qwen35 export of a tiny release.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "export/qwen35_gguf.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/release.h"
#include "formats/mxfp4.h"
#include "stave/errors.h"
#include "synth/synth_release.h"
#include "test_util.h"
#include "util/bf16.h"

namespace stave {
namespace {
namespace fs = std::filesystem;

std::vector<uint8_t> bytes_of(const gguf::File& f, const gguf::TensorEntry& t) {
  const uint8_t* p = f.data(t);
  return {p, p + t.nbytes};
}

TEST(Gguf, WrittenFileReadsBack) {
  const std::string path = stave::test::temp_dir() + "/roundtrip.gguf";
  gguf::Writer w;
  w.add_string("general.architecture", "qwen35");
  w.add_u32("qwen35.block_count", 3);
  w.add_f32("qwen35.rope.freq_base", 1e7f);
  w.add_bool("flag", true);
  w.add_u64("big", 1ull << 40);
  w.add_i32_array("qwen35.rope.dimension_sections", {11, 11, 10, 0});
  w.add_string_array("tokenizer.ggml.tokens", {"a", "", "Ġb"});
  w.add_tensor("t.f32", {3}, gguf::TensorType::kF32);                // 12 bytes: next offset must be padded
  w.add_tensor("t.bf16", {5, 2}, gguf::TensorType::kBF16);          // 20 bytes
  w.add_tensor("t.mxfp4", {64, 2}, gguf::TensorType::kMXFP4);       // 2 blocks x 2 rows x 17 = 68 bytes
  EXPECT_THROW(w.add_tensor("t.f32", {1}, gguf::TensorType::kF32), Error);
  EXPECT_THROW(w.add_tensor("bad", {48}, gguf::TensorType::kMXFP4), Error);
  std::vector<std::vector<uint8_t>> payload(3);
  for (size_t i = 0; i < 3; ++i) {
    payload[i].resize(w.tensors()[i].nbytes);
    for (size_t j = 0; j < payload[i].size(); ++j) payload[i][j] = static_cast<uint8_t>(17 * i + j);
  }
  w.write(path, [&](size_t i, const gguf::Writer::WriteFn& write) { write(payload[i].data(), payload[i].size()); });

  gguf::File f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  ASSERT_EQ(f.metadata().size(), 7u);
  EXPECT_EQ(f.find("general.architecture")->value, "qwen35");
  EXPECT_EQ(f.find("qwen35.block_count")->type, gguf::ValueType::kUint32);
  EXPECT_EQ(f.find("qwen35.block_count")->value, 3);
  EXPECT_FLOAT_EQ(f.find("qwen35.rope.freq_base")->value.get<float>(), 1e7f);
  EXPECT_EQ(f.find("flag")->value, true);
  EXPECT_EQ(f.find("big")->value.get<uint64_t>(), 1ull << 40);
  EXPECT_EQ(f.find("qwen35.rope.dimension_sections")->array_type, gguf::ValueType::kInt32);
  EXPECT_EQ(f.find("qwen35.rope.dimension_sections")->value, nlohmann::json({11, 11, 10, 0}));
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->value, nlohmann::json({"a", "", "Ġb"}));
  ASSERT_EQ(f.tensors().size(), 3u);
  const uint64_t expect_offsets[] = {0, 32, 64}, expect_bytes[] = {12, 20, 68};
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = f.tensors()[i];
    EXPECT_EQ(t.offset, expect_offsets[i]) << t.name;
    EXPECT_EQ(t.nbytes, expect_bytes[i]) << t.name;
    EXPECT_EQ(bytes_of(f, t), payload[i]) << t.name;
  }
  EXPECT_EQ(f.find_tensor("t.bf16")->ne, (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(f.find_tensor("t.mxfp4")->type, gguf::TensorType::kMXFP4);
  // Nothing after the last tensor: the file ends where the data does.
  EXPECT_EQ(fs::file_size(path), f.data_offset() + 64 + 68);
}

TEST(Gguf, ReaderRefusesBrokenFiles) {
  const std::string path = stave::test::temp_dir() + "/broken.gguf";
  gguf::Writer w;
  w.add_string("general.architecture", "qwen35");
  w.add_tensor("t", {8}, gguf::TensorType::kF32);
  std::vector<float> v(8, 1.0f);
  w.write(path, [&](size_t, const gguf::Writer::WriteFn& write) { write(v.data(), 32); });
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto try_read = [&](const std::string& bytes) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << bytes;
    }
    gguf::File f(path);
  };
  EXPECT_NO_THROW(try_read(good));
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_THROW(try_read(bad), Error);                              // magic
  EXPECT_THROW(try_read(good.substr(0, good.size() - 4)), Error);  // data cut short
  EXPECT_THROW(try_read(good.substr(0, 30)), Error);               // header cut short
  bad = good;
  bad[16] = '\x7f';  // metadata count far beyond the file
  EXPECT_THROW(try_read(bad), Error);
}

TEST(Gguf, QuarkBlockBecomesSplitHalfNibbles) {
  // Element i of the block has code i % 16 (so each position is recognisable).
  uint8_t quark[16];
  for (int k = 0; k < 16; ++k) quark[k] = static_cast<uint8_t>(((2 * k) % 16) | (((2 * k + 1) % 16) << 4));
  uint8_t out[17];
  gguf::quark_block_to_gguf(quark, 130, out);
  EXPECT_EQ(out[0], 130);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[1 + j] & 0x0F, j % 16) << j;         // element j
    EXPECT_EQ(out[1 + j] >> 4, (j + 16) % 16) << j;    // element j + 16
  }
}

// The ggml dequantization of a block (ggml-quants.c dequantize_row_mxfp4, written out from its
// definition: doubled E2M1 table, scale 2^(e-128)), independent of our Quark code.
void ggml_dequantize_block(const uint8_t b[17], float out[32]) {
  static const int8_t kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const float d = std::ldexp(1.0f, static_cast<int>(b[0]) - 128);
  for (int j = 0; j < 16; ++j) {
    out[j] = kvalues[b[1 + j] & 0x0F] * d;
    out[j + 16] = kvalues[b[1 + j] >> 4] * d;
  }
}

TEST(Gguf, ExportedTinyReleaseHasLlamaCppNamesAndLosslessMxfp4) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  const std::string dir = stave::test::temp_dir() + "/gguf-tiny-mxfp4", out = stave::test::temp_dir() + "/tiny.gguf";
  fs::remove_all(dir);
  synth::SynthOptions so;
  so.preset = "tiny";
  so.format = "mxfp4";
  so.out = dir;
  so.seed = 5;
  so.tokenizer = test::fixture("public/model-bf16/tokenizer.json");
  synth::synth_release(so);
  gguf::ExportOptions eo;
  eo.model = dir;
  eo.out = out;
  auto summary = gguf::export_qwen35_gguf(eo);
  EXPECT_EQ(summary.weight_format, "mxfp4");

  gguf::File f(out);
  auto rel = open_release(dir);
  const auto& t = rel->config.text;
  EXPECT_EQ(f.find("general.architecture")->value, "qwen35");
  EXPECT_EQ(f.find("qwen35.block_count")->value, t.num_hidden_layers);
  EXPECT_EQ(f.find("qwen35.embedding_length")->value, t.hidden_size);
  EXPECT_EQ(f.find("qwen35.ssm.time_step_rank")->value, t.linear_num_value_heads);
  EXPECT_EQ(f.find("qwen35.full_attention_interval")->value, 4);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->value.size(), static_cast<size_t>(t.vocab_size));
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->value.size(), static_cast<size_t>(t.vocab_size));

  // Layer 0 is linear attention, layer 3 full attention (3:1 pattern).
  for (const char* name : {"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_qkv.weight",
                           "blk.0.attn_gate.weight", "blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_conv1d.weight",
                           "blk.0.ssm_beta.weight", "blk.0.ssm_alpha.weight", "blk.0.ssm_norm.weight", "blk.0.ssm_out.weight",
                           "blk.3.attn_q.weight", "blk.3.attn_k.weight", "blk.3.attn_v.weight", "blk.3.attn_output.weight",
                           "blk.3.attn_q_norm.weight", "blk.3.attn_k_norm.weight", "blk.3.post_attention_norm.weight",
                           "blk.3.ffn_down.weight"})
    EXPECT_NE(f.find_tensor(name), nullptr) << name;
  EXPECT_EQ(f.find_tensor("blk.3.ffn_gate.weight")->type, gguf::TensorType::kMXFP4);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, gguf::TensorType::kBF16);
  EXPECT_EQ(f.find_tensor("blk.0.ssm_conv1d.weight")->ne,
            (std::vector<int64_t>{t.linear_conv_kernel_dim, t.linear_conv_dim()}));

  // An MXFP4 linear without reordering: GGUF values (ggml's definition) == Quark values.
  const std::string src = "model.language_model.layers.3.mlp.down_proj.weight";
  const TensorRef& codes = rel->weights.get(src);
  const TensorRef& scales = rel->weights.get("model.language_model.layers.3.mlp.down_proj.weight_scale");
  const auto* g = f.find_tensor("blk.3.ffn_down.weight");
  const int64_t rows = g->ne[1], cols = g->ne[0];
  std::vector<float> quark_row(static_cast<size_t>(cols)), ggml_row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    mxfp4::dequantize_row(codes.data + r * cols / 2, scales.data + r * cols / 32, cols, quark_row.data());
    for (int64_t b = 0; b < cols / 32; ++b) ggml_dequantize_block(f.data(*g) + (r * cols / 32 + b) * 17, ggml_row.data() + b * 32);
    ASSERT_EQ(quark_row, ggml_row) << "row " << r;
  }
  // Norms are stored as 1 + w, A_log as -exp(A_log), as llama.cpp's converter does.
  const TensorRef& n = rel->weights.get("model.language_model.norm.weight");
  const auto* gn = f.find_tensor("output_norm.weight");
  float first;
  std::memcpy(&first, f.data(*gn), 4);
  uint16_t h;
  std::memcpy(&h, n.data, 2);
  EXPECT_FLOAT_EQ(first, 1.0f + bf16_to_f32(h));
}

TEST(Gguf, ExportRefusesShapesLlamaCppCannotHold) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/tokenizer.json");
  // alt: linear key and value head sizes differ.
  const std::string dir = stave::test::temp_dir() + "/gguf-alt";
  fs::remove_all(dir);
  synth::SynthOptions so;
  so.preset = "alt";
  so.out = dir;
  so.tokenizer = test::fixture("public/model-bf16/tokenizer.json");
  synth::synth_release(so);
  gguf::ExportOptions eo;
  eo.model = dir;
  eo.out = stave::test::temp_dir() + "/alt.gguf";
  try {
    gguf::export_qwen35_gguf(eo);
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("linear_key_head_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stave
