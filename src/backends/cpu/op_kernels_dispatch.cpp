#include <cstdlib>
#include <cstring>

#include "backends/cpu/op_kernels.h"

namespace stave::cpu {
namespace {

// STAVE_CPU_ISA=generic|avx2|avx512 caps the choice (tests and benchmarks compare the tables).
const OpKernels& choose() {
  const char* cap = std::getenv("STAVE_CPU_ISA");
  const bool allow512 = !cap || !*cap || std::strcmp(cap, "avx512") == 0;
  const bool allow2 = allow512 || std::strcmp(cap, "avx2") == 0;
  __builtin_cpu_init();
  if (allow512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return op_kernels_avx512();
  if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return op_kernels_avx2();
  return op_kernels_generic();
}

}  // namespace

const OpKernels& op_kernels() {
  static const OpKernels& k = choose();
  return k;
}

}  // namespace stave::cpu
