#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "io/safetensors.h"
#include "stave/errors.h"
#include "test_util.h"

namespace stave {
namespace {

std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes, bool pad = true) {
  std::string h = header;
  if (pad)
    while (h.size() % 8) h.push_back(' ');
  std::vector<uint8_t> out(8);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), h.begin(), h.end());
  out.resize(out.size() + data_bytes, 0x5a);
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse_safetensors(bytes.data(), bytes.size(), "t.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    return e.what();
  }
  return "";
}

TEST(Safetensors, ParsesValidFileInOffsetOrder) {
  auto f = make_file(R"({"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[8,20]},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})",
                     20);
  auto c = parse_safetensors(f.data(), f.size(), "t");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].name, "a");
  EXPECT_EQ(c.tensors[1].name, "b");
  EXPECT_EQ(c.tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.tensors[1].nbytes, 12u);
  EXPECT_EQ(c.metadata.at("format"), "pt");
}

TEST(Safetensors, ScalarAndEmptyTensors) {
  auto f = make_file(R"({"s":{"dtype":"BF16","shape":[],"data_offsets":[0,2]},)"
                     R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[2,2]}})",
                     2);
  auto c = parse_safetensors(f.data(), f.size(), "t");
  ASSERT_EQ(c.tensors.size(), 2u);
}

TEST(Safetensors, RejectsHostileFiles) {
  EXPECT_NE(error_of({1, 2, 3}).find("shorter than"), std::string::npos);
  {
    std::vector<uint8_t> f(16, 0);
    f[0] = 0xff; f[1] = 0xff; f[2] = 0xff; f[3] = 0xff; f[4] = 0xff; f[5] = 0xff; f[6] = 0xff; f[7] = 0x7f;
    EXPECT_NE(error_of(f).find("exceeds the limit"), std::string::npos);
  }
  {
    std::vector<uint8_t> f(16, 0);
    f[0] = 100;
    EXPECT_NE(error_of(f).find("past the end"), std::string::npos);
  }
  EXPECT_NE(error_of(make_file("[1,2]", 0)).find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(make_file("{\"a\":", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1)).find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("needs 12"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4)).find("past the end"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("begin after end"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                               R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                               6))
                .find("overlaps"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6)).find("gap"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 9)).find("not described"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                               R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                               8))
                .find("twice"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", 4)).find("non-negative"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4))
                .find("overflow"),
            std::string::npos);
  EXPECT_NE(error_of(make_file("{\"\xff\xfe\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1))
                .find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", 1)).find("unknown field"),
            std::string::npos);
}

TEST(Safetensors, WriteThenReadRoundTrips) {
  std::string path = stave::test::temp_dir() + "/roundtrip.safetensors";
  std::vector<float> a{1.f, 2.f, 3.f};
  std::vector<uint8_t> b{7, 8};
  write_safetensors(path, {{"x", DType::kF32, {3}, a.data(), 12}, {"y", DType::kU8, {1, 2}, b.data(), 2}},
                    {{"format", "pt"}});
  SafetensorsFile f(path);
  ASSERT_NE(f.find("x"), nullptr);
  EXPECT_EQ(std::memcmp(f.find("x")->data, a.data(), 12), 0);
  EXPECT_EQ(f.find("y")->data[1], 8);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(Safetensors, OpensFixtureShards) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/model-00002-of-00002.safetensors");
  SafetensorsFile f(test::fixture("public/model-bf16/model-00002-of-00002.safetensors"));
  const TensorRef* a = f.find("model.language_model.layers.0.linear_attn.A_log");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
}

}  // namespace
}  // namespace stave
