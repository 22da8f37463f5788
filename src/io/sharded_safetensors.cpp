#include "io/sharded_safetensors.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "stave/errors.h"

namespace stave {

uint64_t ShardTensor::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

namespace {

std::vector<std::vector<const ShardTensor*>> plan_shards(const std::vector<std::vector<ShardTensor>>& units,
                                                         uint64_t shard_bytes, uint64_t* total_size) {
  std::vector<std::vector<const ShardTensor*>> shards;
  uint64_t in_shard = 0;
  *total_size = 0;
  for (const auto& u : units) {
    uint64_t n = 0;
    for (const ShardTensor& t : u) n += t.nbytes();
    *total_size += n;
    if (shards.empty() || (in_shard > 0 && in_shard + n > shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    for (const ShardTensor& t : u) shards.back().push_back(&t);
    in_shard += n;
  }
  for (auto& s : shards)
    std::stable_sort(s.begin(), s.end(),
                     [](const ShardTensor* a, const ShardTensor* b) { return dtype_size(a->dtype) > dtype_size(b->dtype); });
  return shards;
}

void write_index(const std::filesystem::path& path, const std::map<std::string, std::string>& weight_map,
                 uint64_t total_size) {
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}},
                                  {"weight_map", nlohmann::ordered_json::object()}};
  for (const auto& [name, file] : weight_map) index["weight_map"][name] = file;  // std::map: sorted
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << index.dump(2) << "\n";
  if (!f) throw Error(ErrorKind::kIo, "cannot write " + path.string());
}

}  // namespace

ShardedFiles write_sharded_safetensors(const std::filesystem::path& out,
                                       const std::vector<std::vector<ShardTensor>>& units, uint64_t shard_bytes,
                                       const ProduceShardTensor& produce) {
  ShardedFiles result;
  const auto shards = plan_shards(units, shard_bytes, &result.total_size);
  result.shards = shards.size();
  std::map<std::string, std::string> weight_map;
  char fname[64];
  for (size_t si = 0; si < shards.size(); ++si) {
    std::snprintf(fname, sizeof fname, "model-%05zu-of-%05zu.safetensors", si + 1, shards.size());
    SafetensorsWriter w;
    w.set_metadata({{"format", "pt"}});
    std::map<std::string, const ShardTensor*> by_name;
    for (const ShardTensor* t : shards[si]) {
      w.declare(t->name, t->dtype, t->shape);
      weight_map[t->name] = fname;
      by_name[t->name] = t;
    }
    w.write((out / fname).string(), [&](const SafetensorsWriter::Entry& e, const SafetensorsWriter::WriteFn& write) {
      produce(*by_name.at(e.name), write);
    });
    result.files.push_back(fname);
  }
  write_index(out / "model.safetensors.index.json", weight_map, result.total_size);
  result.files.push_back("model.safetensors.index.json");
  return result;
}

}  // namespace stave
