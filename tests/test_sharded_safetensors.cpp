// The one writer of sharded releases (io/sharded_safetensors, used by quantize and synth):
// huggingface_hub's greedy cut, units kept whole, wider types first in a file, the sorted index.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/sharded_safetensors.h"
#include "test_temp.h"

namespace stave {
namespace {

namespace fs = std::filesystem;

TEST(ShardedSafetensors, CutsGreedilyKeepsUnitsAndWritesTheIndex) {
  const fs::path out = fs::path(test::temp_dir()) / "sharded";
  fs::create_directories(out);
  // 100-byte shards: [a (64 B)] [b codes 32 B + b scales 8 B, c F32 16 B => 56 B] [d 200 B alone] [e 8 B]
  std::vector<std::vector<ShardTensor>> units = {
      {{"a", DType::kBF16, {32}, 0}},
      {{"b.weight", DType::kU8, {32}, 1}, {"b.weight_scale", DType::kU8, {8}, 2}},
      {{"c", DType::kF32, {4}, 3}},
      {{"d", DType::kBF16, {100}, 4}},
      {{"e", DType::kF32, {2}, 5}},
  };
  std::vector<int> produced;
  const ShardedFiles r = write_sharded_safetensors(out, units, 100, [&](const ShardTensor& t, const auto& write) {
    produced.push_back(static_cast<int>(t.id));
    std::vector<uint8_t> bytes(t.nbytes(), static_cast<uint8_t>(t.id));
    write(bytes.data(), bytes.size());
  });
  ASSERT_EQ(r.shards, 4u);
  EXPECT_EQ(r.total_size, 64u + 32 + 8 + 16 + 200 + 8);
  ASSERT_EQ(r.files.size(), 5u);
  EXPECT_EQ(r.files[0], "model-00001-of-00004.safetensors");
  EXPECT_EQ(r.files[4], "model.safetensors.index.json");
  EXPECT_EQ(produced.size(), 6u);

  // Shard 2 holds b's codes and scales and c, c (F32) first.
  SafetensorsFile s2((out / "model-00002-of-00004.safetensors").string());
  ASSERT_EQ(s2.tensors().size(), 3u);
  const TensorRef* c = s2.find("c");
  const TensorRef* scales = s2.find("b.weight_scale");
  ASSERT_TRUE(c && scales && s2.find("b.weight"));
  EXPECT_LT(c->data, scales->data);
  EXPECT_EQ(static_cast<int>(scales->data[0]), 2);
  EXPECT_EQ(s2.metadata().at("format"), "pt");
  SafetensorsFile s3((out / "model-00003-of-00004.safetensors").string());
  EXPECT_EQ(s3.tensors().size(), 1u);  // the oversized unit alone

  std::ifstream f(out / "model.safetensors.index.json");
  const auto index = nlohmann::ordered_json::parse(f);
  EXPECT_EQ(index["metadata"]["total_size"], r.total_size);
  std::vector<std::string> names;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) names.push_back(it.key());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b.weight", "b.weight_scale", "c", "d", "e"}));
  EXPECT_EQ(index["weight_map"]["e"], "model-00004-of-00004.safetensors");
}

}  // namespace
}  // namespace stave
