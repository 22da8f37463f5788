// Streams a safetensors file whose tensors are produced one at a time: the header (names,
// dtypes, shapes, offsets) is written first from the declared shapes, then each tensor's bytes
// are appended in order. Used to write multi-GB checkpoints without holding them in memory.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace stave {

class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
  };

  void declare(std::string name, DType dtype, std::vector<int64_t> shape);
  void set_metadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }
  const std::vector<Entry>& entries() const { return entries_; }
  uint64_t data_bytes() const;

  // Writes the file; `produce(entry, write)` must call write(ptr, n) with exactly entry.nbytes
  // bytes in total (in any number of pieces), for each entry in declaration order.
  using WriteFn = std::function<void(const void* data, size_t n)>;
  void write(const std::string& path, const std::function<void(const Entry&, const WriteFn&)>& produce) const;

 private:
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace stave
