// All tensors of one checkpoint, across its shards: a single safetensors file or a sharded set
// described by model.safetensors.index.json. Tensors stay in the mapped files.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace stave {

// Limits on a model.safetensors.index.json, refused before the shards are opened.
inline constexpr size_t kMaxIndexBytes = size_t{64} << 20;
inline constexpr size_t kMaxIndexTensors = size_t{1} << 20;
inline constexpr size_t kMaxIndexShards = 10000;
inline constexpr size_t kMaxIndexNameBytes = 4096;

// Reads model.safetensors.index.json text into shard file -> tensor names. Throws
// stave::Error(kInvalidModel) starting with `label` for bad JSON, a missing weight_map, a value
// that is not a plain file name, or a limit exceeded.
std::map<std::string, std::vector<std::string>> parse_safetensors_index(const std::string& text,
                                                                        const std::string& label);

class TensorStore {
 public:
  TensorStore() = default;
  // Opens `dir`/model.safetensors.index.json if present, else `dir`/model.safetensors.
  static TensorStore open_checkpoint(const std::string& dir);
  // Opens one file.
  static TensorStore open_file(const std::string& path);

  const TensorRef* find(const std::string& name) const;
  // Throws stave::Error(kInvalidModel) naming the tensor when it is missing.
  const TensorRef& get(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;
  const std::vector<std::string>& files() const { return files_; }
  size_t total_bytes() const;

 private:
  void add(std::unique_ptr<SafetensorsFile> f);
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<std::string> files_;
  std::map<std::string, const TensorRef*> by_name_;
};

}  // namespace stave
