#include "backends/cuda/tensor_map.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "stave/errors.h"

namespace stave::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encoder() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

bool tensor_maps_available() { return encoder() != nullptr; }

CUtensorMap byte_map(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                     CUtensorMapSwizzle swizzle) {
  if (!encoder()) throw Error(ErrorKind::kInternal, "the driver has no cuTensorMapEncodeTiled");
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box,
                               elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorKind::kInternal, "cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(r)) +
                                          ") for a " + std::to_string(rows) + " x " + std::to_string(cols) +
                                          " byte tensor");
  return map;
}

const CUtensorMap& cached_byte_map(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                                   CUtensorMapSwizzle swizzle) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int64_t, int64_t, int, int, int>, CUtensorMap> maps;
  std::lock_guard lock(mutex);
  const auto key = std::make_tuple(base, rows, cols, box_cols, box_rows, static_cast<int>(swizzle));
  auto it = maps.find(key);
  if (it == maps.end()) it = maps.emplace(key, byte_map(base, rows, cols, box_cols, box_rows, swizzle)).first;
  return it->second;
}

}  // namespace stave::cuda
