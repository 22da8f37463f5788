#include "ops/tensor.h"

#include <cstdlib>
#include <new>

#include "stave/errors.h"

namespace stave {

const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

Tensor::Tensor(std::shared_ptr<void> storage, void* data, Shape shape, DType dtype, Device device)
    : storage_(std::move(storage)), data_(data), shape_(std::move(shape)), dtype_(dtype), device_(device) {
  for (int64_t d : shape_)
    if (d < 0) throw Error(ErrorKind::kInternal, "tensor shape " + describe() + " has a negative dimension");
}

Tensor Tensor::host(std::vector<float> values, Shape shape) {
  auto owner = std::make_shared<std::vector<float>>(std::move(values));
  Tensor t(owner, owner->data(), std::move(shape), DType::kF32, Device::kCpu);
  if (static_cast<size_t>(t.numel()) != owner->size())
    throw Error(ErrorKind::kInternal, "host tensor " + t.describe() + " made from " + std::to_string(owner->size()) +
                                          " values");
  return t;
}

Tensor Tensor::host(std::vector<float> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return host(std::move(values), {n});
}

Tensor Tensor::host_empty(Shape shape, DType dtype) {
  Tensor t(nullptr, nullptr, std::move(shape), dtype, Device::kCpu);
  const size_t bytes = (t.bytes() + 63) / 64 * 64;
  void* p = bytes ? std::aligned_alloc(64, bytes) : nullptr;
  if (bytes && !p) throw std::bad_alloc();
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  // A zero-sized tensor still gets a distinct non-null address so that empty() means "none".
  static char zero_sized;
  t.data_ = p ? p : &zero_sized;
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device) {
  return Tensor(nullptr, data, std::move(shape), dtype, device);
}

int64_t Tensor::dim(int64_t i) const {
  if (i < 0 || i >= rank()) throw Error(ErrorKind::kInternal, "dimension " + std::to_string(i) + " of " + describe());
  return shape_[static_cast<size_t>(i)];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

void Tensor::check_type(DType wanted) const {
  if (wanted != dtype_)
    throw Error(ErrorKind::kInternal, std::string("tensor ") + describe() + " read as " + std::string(dtype_name(wanted)));
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  if (rank() == 0 || first < 0 || count < 0 || first + count > shape_[0])
    throw Error(ErrorKind::kInternal, "rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                          ") of " + describe());
  Shape s = shape_;
  s[0] = count;
  const int64_t row_elems = shape_[0] ? numel() / shape_[0] : 0;
  char* p = static_cast<char*>(data_) + static_cast<size_t>(first * row_elems) * dtype_size(dtype_);
  return Tensor(storage_, p, std::move(s), dtype_, device_);
}

Tensor Tensor::reshape(Shape shape) const {
  Tensor t(storage_, data_, std::move(shape), dtype_, device_);
  if (t.numel() != numel()) throw Error(ErrorKind::kInternal, "reshape of " + describe() + " to " + t.describe());
  return t;
}

std::string Tensor::describe() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "] on " + device_name(device_);
}

}  // namespace stave
