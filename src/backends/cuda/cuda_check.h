// Error checks for CUDA runtime and cuBLAS calls: a failing call becomes a stave::Error naming
// the call and the CUDA error, never a silent wrong result.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "stave/errors.h"

namespace stave::cuda {

[[noreturn]] inline void throw_cuda(const char* what, cudaError_t e) {
  throw Error(ErrorKind::kInternal, std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}
[[noreturn]] inline void throw_cublas(const char* what, cublasStatus_t s) {
  throw Error(ErrorKind::kInternal, std::string("cuBLAS: ") + what + ": status " + std::to_string(static_cast<int>(s)));
}

}  // namespace stave::cuda

#define STAVE_CUDA_CHECK(call)                                      \
  do {                                                              \
    cudaError_t stave_e_ = (call);                                  \
    if (stave_e_ != cudaSuccess) ::stave::cuda::throw_cuda(#call, stave_e_); \
  } while (0)

#define STAVE_CUBLAS_CHECK(call)                                       \
  do {                                                                 \
    cublasStatus_t stave_s_ = (call);                                  \
    if (stave_s_ != CUBLAS_STATUS_SUCCESS) ::stave::cuda::throw_cublas(#call, stave_s_); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define STAVE_CUDA_LAUNCHED() STAVE_CUDA_CHECK(cudaGetLastError())
