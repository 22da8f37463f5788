// The leaf kernels for any x86-64 (baseline flags): the fallback table.
#define STAVE_OP_KERNELS_NS generic
#define STAVE_OP_KERNELS_ISA "generic"
#include "backends/cpu/op_kernels_body.h"

namespace stave::cpu {
const OpKernels& op_kernels_generic() { return generic::table(); }
}  // namespace stave::cpu
