// The leaf kernels compiled for AVX2 + FMA (this folder's flags).
#define STAVE_OP_KERNELS_NS avx2
#define STAVE_OP_KERNELS_ISA "avx2"
#include "backends/cpu/op_kernels_body.h"

namespace stave::cpu {
const OpKernels& op_kernels_avx2() { return avx2::table(); }
}  // namespace stave::cpu
