// A tensor handle: shape, element type, the device its memory is on, and either a share of the
// storage that owns the memory or a borrowed pointer. Backends allocate tensors in their own
// memory (Backend::empty); ops take the raw pointers (as CTranslate2's primitives<Device> do
// under its StorageView), so a kernel never needs to know how its memory was allocated.
//
// Views (rows, reshape) share the storage: a view keeps the memory alive as long as it lives.
// Copies between devices happen only where the caller asks for them (Backend::to_device,
// Backend::to_host, Backend::copy_from_host, Backend::copy_to_host).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace stave {

enum class Device { kCpu, kCuda };
const char* device_name(Device d);

class Tensor {
 public:
  using Shape = std::vector<int64_t>;

  Tensor() = default;
  // `storage` owns the memory `data` points into (nullptr: borrowed, the caller keeps it alive).
  Tensor(std::shared_ptr<void> storage, void* data, Shape shape, DType dtype, Device device);

  // A host tensor owning a copy of `values` (moved in, no copy).
  static Tensor host(std::vector<float> values, Shape shape);
  static Tensor host(std::vector<float> values);  // 1-D
  // A fresh host tensor (64-byte aligned, uninitialised).
  static Tensor host_empty(Shape shape, DType dtype = DType::kF32);
  // A borrowed view of memory the caller owns.
  static Tensor borrow(void* data, Shape shape, DType dtype, Device device);

  bool empty() const { return data_ == nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const;
  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool owning() const { return storage_ != nullptr; }
  const std::shared_ptr<void>& storage() const { return storage_; }

  void* raw() const { return data_; }
  // Typed access; an Error when T does not match the dtype.
  template <class T>
  T* data() const;

  // Rows [first, first + count) of dimension 0 (the tensor is contiguous, row-major).
  Tensor rows(int64_t first, int64_t count) const;
  // The same memory under another shape with the same number of elements.
  Tensor reshape(Shape shape) const;

  std::string describe() const;  // "f32[3, 4] on cpu"

 private:
  void check_type(DType wanted) const;

  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
};

template <>
inline float* Tensor::data<float>() const {
  check_type(DType::kF32);
  return static_cast<float*>(data_);
}
template <>
inline int32_t* Tensor::data<int32_t>() const {
  check_type(DType::kI32);
  return static_cast<int32_t*>(data_);
}
template <>
inline int64_t* Tensor::data<int64_t>() const {
  check_type(DType::kI64);
  return static_cast<int64_t*>(data_);
}
template <>
inline uint8_t* Tensor::data<uint8_t>() const {
  check_type(DType::kU8);
  return static_cast<uint8_t*>(data_);
}

}  // namespace stave
