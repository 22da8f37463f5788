// An owning device allocation (cudaMalloc; never managed memory) with host copies, and an
// owning page-locked host allocation for the copies that must be fast and stream-ordered.
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
  // resize, except that a device out of memory leaves the buffer empty and returns false
  // (other errors still throw).
  bool try_resize(size_t bytes) {
    release();
    if (!bytes) return true;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      ptr_ = nullptr;
      return false;
    }
    STAVE_CUDA_CHECK(e);
    bytes_ = bytes;
    return true;
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

// Page-locked host memory (cudaMallocHost): copies to and from it run at the link's speed and
// asynchronously on a stream, and its pages are touched once, not on every call as a fresh
// std::vector's are (at 8192 tokens the hidden states are 168 MB).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Grows (never shrinks) to at least `bytes`; the contents are not kept. The caller makes
  // sure no copy from or to the old memory is still in flight.
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    release();
    STAVE_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
    bytes_ = bytes;
  }
  template <class T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void release() {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace stave::cuda
