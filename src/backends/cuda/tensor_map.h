// TMA tensor maps for byte tensors (the fused MXFP4 GEMMs' activation, code and block-byte
// tiles), through the driver's cuTensorMapEncodeTiled fetched once at run time (no link to
// libcuda).
#pragma once
#include <cuda.h>

#include <cstdint>

namespace stave::cuda {

// Whether the driver's encoder was found (the fused kernels need it).
bool tensor_maps_available();

// A 2-D byte tensor [rows, cols] (row pitch = cols) read in boxes of box_rows × box_cols, laid out
// in shared memory with `swizzle`. Throws an Error naming the shape if the driver refuses it.
CUtensorMap byte_map(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                     CUtensorMapSwizzle swizzle);

// The same, encoded once per (base, shape, box, swizzle) and kept: for weights, whose maps every
// product would otherwise encode again. A map is a function of those alone, so a weight freed
// and another uploaded at the same address with the same shape gets the right map too.
const CUtensorMap& cached_byte_map(const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows,
                                   CUtensorMapSwizzle swizzle);

}  // namespace stave::cuda
