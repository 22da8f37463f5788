// A tensor as stored in a checkpoint: name, type, shape and a pointer into a mapped file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace stave {

struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into a MappedFile owned by the store
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int rank() const { return static_cast<int>(shape.size()); }
  std::string shape_string() const;  // "[32, 64]"
};

}  // namespace stave
