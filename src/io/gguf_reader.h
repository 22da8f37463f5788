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

// Limits, refused with an error before anything is allocated for them.
inline constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
inline constexpr uint64_t kMaxMetadata = uint64_t{1} << 16;
inline constexpr uint64_t kMaxArrayLength = uint64_t{1} << 22;  // a tokenizer's vocabulary: ~150k
inline constexpr uint64_t kMaxStringBytes = uint64_t{1} << 20;

// What the header says: everything but the tensor bytes.
struct Layout {
  uint32_t version = 0, alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // from the start of the file
  std::vector<MetadataEntry> metadata;
  std::vector<TensorEntry> tensors;
};

// Parses and checks a whole GGUF file held in memory (every tensor must lie inside `size`).
// Throws stave::Error(kInvalidModel) starting with `label`.
Layout parse_layout(const uint8_t* data, size_t size, const std::string& label);

class File {
 public:
  // Throws stave::Error(kInvalidModel) naming the path and what is wrong.
  explicit File(const std::string& path);

  uint32_t version() const { return layout_.version; }
  uint32_t alignment() const { return layout_.alignment; }
  uint64_t data_offset() const { return layout_.data_offset; }  // from the start of the file
  const std::vector<MetadataEntry>& metadata() const { return layout_.metadata; }
  const std::vector<TensorEntry>& tensors() const { return layout_.tensors; }

  const MetadataEntry* find(const std::string& key) const;
  const TensorEntry* find_tensor(const std::string& name) const;
  // The tensor's bytes inside the map.
  const uint8_t* data(const TensorEntry& t) const { return map_.data() + layout_.data_offset + t.offset; }

 private:
  MappedFile map_;
  Layout layout_;
};

}  // namespace stave::gguf
