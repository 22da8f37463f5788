// A minimal, validating GGUF reader: header, metadata (as JSON values), tensor infos,
// alignment and the data section's place. Used to check what our writer produces and by
// `stave export-gguf` users who want to inspect a file; a broken file is an error, never UB.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "util/mapped_file.h"

namespace stave::gguf {

struct MetadataEntry {
  std::string key;
  ValueType type;
  ValueType array_type = ValueType::kUint8;  // for kArray
  nlohmann::json value;                        // number, bool, string or array of them
};

struct TensorEntry {
  std::string name;
  std::vector<int64_t> ne;  // ggml order
  TensorType type;
  uint64_t offset = 0;      // in the data section
  uint64_t nbytes = 0;
};

class File {
 public:
  // Throws stave::Error(kInvalidModel) naming the path and what is wrong.
  explicit File(const std::string& path);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // from the start of the file
  const std::vector<MetadataEntry>& metadata() const { return metadata_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }

  const MetadataEntry* find(const std::string& key) const;
  const TensorEntry* find_tensor(const std::string& name) const;
  // The tensor's bytes inside the map.
  const uint8_t* data(const TensorEntry& t) const { return map_.data() + data_offset_ + t.offset; }

 private:
  MappedFile map_;
  uint32_t version_ = 0, alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<MetadataEntry> metadata_;
  std::vector<TensorEntry> tensors_;
};

}  // namespace stave::gguf
