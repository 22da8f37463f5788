#include "backends/cpu/op_kernels.h"

#include "backends/cpu/cpu_features.h"

namespace stave::cpu {

const OpKernels& op_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAmx:  // no AMX leaf kernels: the AVX-512 table (AMX implies its features)
    case Isa::kAvx512: return op_kernels_avx512();
    case Isa::kAvx2: return op_kernels_avx2();
    case Isa::kGeneric: break;
  }
  return op_kernels_generic();
}

const OpKernels& op_kernels() { return op_kernels_for(active_isa()); }

}  // namespace stave::cpu
