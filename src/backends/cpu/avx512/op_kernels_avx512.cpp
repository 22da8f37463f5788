// The leaf kernels compiled for AVX-512 (this folder's flags).
#define STAVE_OP_KERNELS_NS avx512
#define STAVE_OP_KERNELS_ISA "avx512"
#include "backends/cpu/op_kernels_body.h"

namespace stave::cpu {
const OpKernels& op_kernels_avx512() { return avx512::table(); }
}  // namespace stave::cpu
