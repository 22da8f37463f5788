// An owning device allocation (cudaMalloc; never managed memory) with host copies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include "backends/cuda/cuda_check.h"

namespace stave::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Grows (never shrinks) to at least `bytes`; the contents are not kept.
  void reserve(size_t bytes) {
    if (bytes > bytes_) resize(bytes);
  }
  void resize(size_t bytes) {
    release();
    if (bytes) STAVE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  // Returns once the data is on the device. A plain cudaMemcpy from pageable memory may return
  // while its DMA is still in flight on the legacy stream, which kernels on a non-blocking
  // stream do not wait for: the synchronize closes that race.
  void upload(const void* host, size_t bytes) {
    reserve(bytes);
    if (bytes) {
      STAVE_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
      STAVE_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void download(void* host, size_t bytes) const {
    if (bytes) STAVE_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
  }

  template <class T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace stave::cuda
