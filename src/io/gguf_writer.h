// A streaming GGUF writer: metadata and tensor infos are declared first, then each tensor's
// bytes are produced in order by a callback, so a 27B model never sits in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace stave::gguf {

class Writer {
 public:
  void add_u32(const std::string& key, uint32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);

  // `ne` in ggml order (innermost, i.e. the row length, first). Returns the tensor's index.
  // Throws stave::Error(kInvalidRequest) for a duplicate name or a shape the type cannot hold.
  size_t add_tensor(const std::string& name, std::vector<int64_t> ne, TensorType type);

  struct TensorInfo {
    std::string name;
    std::vector<int64_t> ne;
    TensorType type;
    uint64_t nbytes = 0;
    uint64_t offset = 0;  // in the data section
  };
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t data_bytes() const { return data_bytes_; }

  using WriteFn = std::function<void(const void* data, size_t n)>;
  // Produces tensor i's bytes through `write`; it must write exactly tensors()[i].nbytes.
  using ProduceFn = std::function<void(size_t index, const WriteFn& write)>;
  // Writes the whole file (to path + ".part", renamed when complete). Throws stave::Error(kIo).
  void write(const std::string& path, const ProduceFn& produce, uint32_t alignment = kDefaultAlignment) const;

 private:
  void key(const std::string& k, ValueType t);
  std::string kv_;  // serialized metadata
  uint64_t kv_count_ = 0;
  std::vector<TensorInfo> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace stave::gguf
