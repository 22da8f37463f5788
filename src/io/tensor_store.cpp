#include "io/tensor_store.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "util/json_limits.h"
#include "util/mapped_file.h"

namespace stave {
namespace fs = std::filesystem;

void TensorStore::add(std::unique_ptr<SafetensorsFile> f) {
  for (const auto& t : f->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted)
      throw Error(ErrorKind::kInvalidModel, "tensor \"" + t.name + "\" appears in two shards (" + f->path() + ")");
  }
  files_.push_back(f->path());
  shards_.push_back(std::move(f));
}

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore s;
  s.add(std::make_unique<SafetensorsFile>(path));
  return s;
}

std::map<std::string, std::vector<std::string>> parse_safetensors_index(const std::string& text,
                                                                        const std::string& label) {
  if (text.size() > kMaxIndexBytes)
    throw Error(ErrorKind::kInvalidModel, label + " is " + std::to_string(text.size()) +
                                              " bytes, larger than the limit of " + std::to_string(kMaxIndexBytes));
  check_json_depth(text, label);
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidModel, label + " is not valid JSON (" + e.what() + ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error(ErrorKind::kInvalidModel, label + " has no \"weight_map\" object");
  const auto& map = index["weight_map"];
  if (map.size() > kMaxIndexTensors)
    throw Error(ErrorKind::kInvalidModel, label + " lists " + std::to_string(map.size()) +
                                              " tensors, more than the limit of " + std::to_string(kMaxIndexTensors));
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->is_string()) throw Error(ErrorKind::kInvalidModel, label + ": weight_map values must be file names");
    std::string file = it->get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos || file == "." ||
        file == ".." || file.find('\0') != std::string::npos)
      throw Error(ErrorKind::kInvalidModel, label + ": shard name \"" + file + "\" is not a plain file name");
    if (file.size() > kMaxIndexNameBytes || it.key().size() > kMaxIndexNameBytes)
      throw Error(ErrorKind::kInvalidModel, label + ": a tensor or shard name is longer than " +
                                                std::to_string(kMaxIndexNameBytes) + " bytes");
    by_file[file].push_back(it.key());
    if (by_file.size() > kMaxIndexShards)
      throw Error(ErrorKind::kInvalidModel, label + " names more than " + std::to_string(kMaxIndexShards) + " shards");
  }
  return by_file;
}

TensorStore TensorStore::open_checkpoint(const std::string& dir) {
  fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    fs::path single = fs::path(dir) / "model.safetensors";
    if (!fs::exists(single))
      throw Error(ErrorKind::kInvalidModel,
                  "no model.safetensors.index.json or model.safetensors in " + dir);
    return open_file(single.string());
  }
  const std::string label = index_path.string();
  const auto by_file = parse_safetensors_index(read_file(label, kMaxIndexBytes), label);
  TensorStore s;
  for (const auto& [file, names] : by_file) {
    auto shard = std::make_unique<SafetensorsFile>((fs::path(dir) / file).string());
    for (const auto& n : names)
      if (!shard->find(n))
        throw Error(ErrorKind::kInvalidModel, label + " puts tensor \"" + n + "\" in " + file + ", which lacks it");
    s.add(std::move(shard));
  }
  return s;
}

const TensorRef* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorRef& TensorStore::get(const std::string& name) const {
  const TensorRef* t = find(name);
  if (!t) throw Error(ErrorKind::kInvalidModel, "missing tensor \"" + name + "\"");
  return *t;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [n, _] : by_name_) out.push_back(n);
  return out;
}

size_t TensorStore::total_bytes() const {
  size_t n = 0;
  for (const auto& [_, t] : by_name_) n += t->nbytes;
  return n;
}

}  // namespace stave
