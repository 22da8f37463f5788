// All tensors of one checkpoint, across its shards: a single safetensors file or a sharded set
// described by model.safetensors.index.json. Tensors stay in the mapped files.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace stave {

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
