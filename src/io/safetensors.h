// A validating safetensors reader. A corrupt or hostile file is reported as a stave::Error
// (kInvalidModel) naming the file and what is wrong; it never causes undefined behaviour.
// Checks: header length and limit, JSON and UTF-8 validity, duplicate names, known dtypes,
// shapes, dtype x shape = byte length (overflow-safe), offsets in bounds, no overlaps or gaps.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/tensor_ref.h"
#include "util/mapped_file.h"

namespace stave {

inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;  // as the reference library
inline constexpr size_t kSafetensorsMaxTensors = size_t{1} << 20;  // per file

// Parses a safetensors image held in memory (the file or a fuzzer's buffer). `label` names
// the source in error messages. Returned TensorRefs point into `bytes`.
struct SafetensorsContents {
  std::vector<TensorRef> tensors;  // in file order (ascending offsets)
  std::map<std::string, std::string> metadata;
};
SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return file_.path(); }
  const std::vector<TensorRef>& tensors() const { return contents_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return contents_.metadata; }
  const TensorRef* find(const std::string& name) const;

 private:
  MappedFile file_;
  SafetensorsContents contents_;
  std::map<std::string, size_t> index_;
};

// Writes a safetensors file (used by `stave quantize`, `stave synth` and tests). Tensors are
// written in the given order, with the header padded to a multiple of 8 bytes like the
// reference writer.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t nbytes;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace stave
