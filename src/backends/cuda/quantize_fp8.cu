// The FP8 path's activation quantization (quantize_fp8.h): a two-pass warp form and a register
// form that holds each row in registers (read once) and can form the row from the element-wise
// op before the projection as it loads it.
#include <cuda_fp8.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/activations.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/mxfp4_device.cuh"
#include "backends/cuda/quantize_fp8.h"
#include "backends/cuda/row_groups.cuh"
#include "stave/errors.h"

namespace stave::cuda {
namespace {

using dev::Prologue;
using dev::RowPrologue;

__device__ unsigned long long g_rounded_blocks = 0;

// One CTA (8 warps) per activation row of the padded batch: pass 1 finds the row's largest block
// exponent (R_a = it − 6), pass 2 quantizes each block bit-exactly as mxfp4::qdq_row and writes
// E2M1 · 2^(e − R_a) as E4M3 (exact for e − R_a ≥ −8; below, rounded and counted). Rows ≥ M of
// the padding are zeros with scale 1. K % 32 == 0.
constexpr int kRowWarps = 8;
__global__ void quantize_rows_fp8_kernel(const float* x, int64_t M, int64_t K, int mode, uint8_t* xq,
                                         float* row_scale) {
  const int64_t r = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t nb = K / 32;
  uint8_t* out = xq + r * K;
  if (r >= M) {
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) out[i] = 0;
    if (threadIdx.x == 0) row_scale[r] = 1.0f;
    return;
  }
  const float* in = x + r * K;
  auto block_exponent = [&](int64_t b, float& v) {
    v = in[b * 32 + lane];
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, amax, o);
      amax = amax < other ? other : amax;
    }
    return scale_exponent(amax, mode);
  };
  __shared__ int top[kRowWarps];
  int emax = -1000;
  for (int64_t b = warp; b < nb; b += kRowWarps) {
    float v;
    emax = max(emax, block_exponent(b, v));
  }
  if (lane == 0) top[warp] = emax;
  __syncthreads();
  emax = top[0];
  for (int w = 1; w < kRowWarps; ++w) emax = max(emax, top[w]);
  const int ref = emax - kMaxShift;  // emax in [−127, 127]: 2^ref is a finite fp32
  for (int64_t b = warp; b < nb; b += kRowWarps) {
    float v;
    const int e = block_exponent(b, v);
    const float q = e2m1_round(__fmul_rn(v, ldexpf(1.0f, -e)));
    const int d = e - ref;
    const float t = __fmul_rn(q, ldexpf(1.0f, max(d, -200)));  // exact in fp32 down to its subnormals
    const uint32_t code = __nv_cvt_float_to_fp8(t, __NV_SATFINITE, __NV_E4M3);
    out[b * 32 + lane] = static_cast<uint8_t>(code);
    if (d < kMinShift && __any_sync(0xffffffffu, q != 0.0f) && lane == 0) atomicAdd(&g_rounded_blocks, 1ull);
  }
  if (threadIdx.x == 0) row_scale[r] = ldexpf(1.0f, ref);
}

// The MX block exponent of 8 values of a thread and its block's 3 neighbouring lanes (the 4
// groups of a block sit on lanes 4m … 4m + 3; every lane of the warp must call it). amax as
// mxfp4::qdq_row takes it (std::max: a NaN value is passed over).
__device__ __forceinline__ int block_exponent8(const float (&v)[8], bool valid, int mode) {
  float amax = 0.0f;
  if (valid) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float m = fabsf(v[i]);
      amax = amax < m ? m : amax;
    }
  }
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, amax, o);
    amax = amax < other ? other : amax;
  }
  return scale_exponent(amax, mode);
}

// 8 values of a block of exponent e in a row of reference exponent ref, as E4M3 bytes (two
// words): E2M1 · 2^(e − ref), exact for e − ref ≥ kMinShift. Counts the block (once, from its
// first lane) when it lies further below and is not all zero. Every lane of the warp must call it.
__device__ __forceinline__ void store_group8_e4m3(const float (&v)[8], int e, int ref, bool valid, int lane,
                                                  uint8_t* out) {
  const int d = e - ref;
  const float down = ldexpf(1.0f, -e), up = ldexpf(1.0f, max(d, -200));
  uint32_t words[2];
  bool nonzero = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint32_t w = 0;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const float q0 = e2m1_round(__fmul_rn(v[4 * h + 2 * p], down));
      const float q1 = e2m1_round(__fmul_rn(v[4 * h + 2 * p + 1], down));
      nonzero |= q0 != 0.0f || q1 != 0.0f;
      const float2 t = make_float2(__fmul_rn(q0, up), __fmul_rn(q1, up));
      w |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(t, __NV_SATFINITE, __NV_E4M3)) << (16 * p);
    }
    words[h] = w;
  }
  int flag = d < kMinShift && nonzero;
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) flag |= __shfl_xor_sync(0xffffffffu, flag, o);
  if (valid) {
    *reinterpret_cast<uint2*>(out) = make_uint2(words[0], words[1]);
    if (flag && (lane & 3) == 0) atomicAdd(&g_rounded_blocks, 1ull);
  }
}

// The block's largest exponent over its warps' (top: 32 ints of shared memory); every thread
// of the block must call it, and all get the same value.
__device__ __forceinline__ int row_max_exponent(int emax, int* top) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) emax = max(emax, __shfl_xor_sync(0xffffffffu, emax, o));
  if (lane == 0) top[warp] = emax;
  __syncthreads();
  emax = top[0];
  for (int w = 1; w < nwarps; ++w) emax = max(emax, top[w]);
  return emax;
}

// The same quantization with the row held in registers: one read of x. Each thread owns kG
// groups of 8 consecutive values (groups tid, tid + blockDim, …); the 4 groups of an MX block
// sit on 4 neighbouring lanes, which share its amax by two shuffles. Pass 1 finds the block
// exponents and the row's largest, pass 2 writes E4M3 from the registers. Same scale_exponent,
// e2m1_round and products as quantize_rows_fp8_kernel, so the same bits for finite rows; for a
// NaN value the block's amax follows mxfp4::qdq_row (std::max passes it over), which the warp
// form's butterfly does only on some lanes. K ≤ 8 · kG · kRegsThreads.
constexpr int kRegsThreads = kRowGroupThreads;  // at most (kG = 8 takes 116 registers)
// A prologue forms the row as it is loaded, so that the product quantizes its input without it
// being written first (each with the fp32 rounding of the element-wise op it replaces):
//   kSiluUp      silu(x) ⊙ aux (SwiGLU's product, silu_mul_fast)
//   kSigmoidGate x ⊙ sigmoid(aux) (the attention's output gate, sigmoid_mul_fast)
//   kGatedNorm   per head of 8 · norm_lanes values, w ⊙ x / sqrt(mean x² + eps) · silu(aux)
//                (the Gated DeltaNet's gated RMSNorm, gated_rms_norm_fast's grouped form)
//   kAddNorm     h = x + aux written to h_out, then the row's zero-centred RMSNorm (written to
//                x_out unless null): add_rms_norm_zero_centered's grouped fast form
//   kNorm        the same without the add (rms_norm_zero_centered)
constexpr int kStoreAfterLoadsUpTo = 4;  // groups per thread
template <int kG, Prologue kP = Prologue::kPlain>
__global__ void __launch_bounds__(kRegsThreads) quantize_rows_fp8_regs_kernel(const float* x, RowPrologue pro,
                                                                              int64_t M, int64_t K, int mode,
                                                                              uint8_t* xq, float* row_scale) {
  constexpr bool kRowNorm = kP == Prologue::kAddNorm || kP == Prologue::kNorm;
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31;
  const int64_t groups = K / 8;
  uint8_t* out = xq + r * K;
  if (r >= M) {
    for (int64_t g = tid; g < groups; g += blockDim.x) *reinterpret_cast<uint2*>(out + 8 * g) = make_uint2(0, 0);
    if (tid == 0) row_scale[r] = 1.0f;
    return;
  }
  const float* in = x + r * K;
  float v[kG][8];
  // 1. The row as the product takes it. Past the row (g ≥ groups) everything stays zero; those
  // lanes still join a norm's shuffles, and write nothing.
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int64_t g = tid + static_cast<int64_t>(j) * blockDim.x;
    float u[8] = {}, w8[8] = {};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[j][i] = 0.0f;
    if (g < groups) {
      load8(in + 8 * g, v[j]);
      if constexpr (kP != Prologue::kPlain && kP != Prologue::kNorm) load8(pro.aux + r * K + 8 * g, u);
      // The head's norm weights for this group (K is a whole number of heads).
      if constexpr (kP == Prologue::kGatedNorm) load8(pro.norm_w + (8 * g) % (8 * pro.norm_lanes), w8);
      if constexpr (kP == Prologue::kAddNorm) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[j][i] = __fadd_rn(v[j][i], u[i]);
        if constexpr (kG > kStoreAfterLoadsUpTo) store8(pro.h_out + r * K + 8 * g, v[j]);
      }
    }
    if constexpr (kP == Prologue::kSiluUp) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[j][i] = silu_f(v[j][i]) * u[i];
    } else if constexpr (kP == Prologue::kSigmoidGate) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[j][i] = v[j][i] * sigmoid_f(u[i]);
    } else if constexpr (kP == Prologue::kGatedNorm) {
      gated_norm_group8(v[j], u, w8, pro.norm_lanes, pro.eps);
    }
  }
  // The sums go back to h once every load of the row is issued (a store between them would make
  // each next load wait: h_out may alias x); rows of more groups store as they go (at kG = 8 the
  // sums held until then would spill).
  if constexpr (kP == Prologue::kAddNorm && kG <= kStoreAfterLoadsUpTo) {
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const int64_t g = tid + static_cast<int64_t>(j) * blockDim.x;
      if (g < groups) store8(pro.h_out + r * K + 8 * g, v[j]);
    }
  }
  if constexpr (kRowNorm) {
    __shared__ float part[32];
    const float ss = row_sum_squares<kG>(v, part);
#pragma unroll
    for (int j = 0; j < kG; ++j) {
      const int64_t g = tid + static_cast<int64_t>(j) * blockDim.x;
      float w8[8] = {};
      if (g < groups) load8(pro.norm_w + 8 * g, w8);
      rms_norm_zc_group8(v[j], w8, ss, K, pro.eps);
      if (g < groups && pro.x_out) store8(pro.x_out + r * K + 8 * g, v[j]);
    }
  }
  // 2. The block exponents and the row's largest.
  int e[kG];
  int emax = -1000;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int64_t g = tid + static_cast<int64_t>(j) * blockDim.x;
    e[j] = block_exponent8(v[j], g < groups, mode);  // groups beyond K/8 come in whole blocks: K % 32 == 0
    if (g < groups) emax = max(emax, e[j]);
  }
  __shared__ int top[32];
  const int ref = row_max_exponent(emax, top) - kMaxShift;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const int64_t g = tid + static_cast<int64_t>(j) * blockDim.x;
    store_group8_e4m3(v[j], e[j], ref, g < groups, lane, out + 8 * g);
  }
  if (tid == 0) row_scale[r] = ldexpf(1.0f, ref);
}

// The same quantization with the row staged in shared memory, for long rows with an element-wise
// prologue (kPlain, kSiluUp, kSigmoidGate): the register form holds a 17,408-value row (SwiGLU's,
// the 27B's) as 8 groups a thread in about 100 registers, two blocks of 288 threads per SM, and
// its loads go out in a few rounds as registers free up. Here each thread has kStagedUnroll groups'
// loads in flight at a time, writes the formed values to shared memory (K · 4 bytes: three
// blocks per SM at K = 17,408) and its block exponents' maximum to a register; the second pass
// reads its own groups back. The same prologue, exponents, roundings and bytes as the register
// form (each MX block's 4 groups of 8 on 4 neighbouring lanes, as there).
constexpr int kStagedThreads = 256;
constexpr int kStagedUnroll = 4;
// The prologues the staged form takes: those of one value each.
__host__ __device__ constexpr bool elementwise(Prologue p) {
  return p == Prologue::kPlain || p == Prologue::kSiluUp || p == Prologue::kSigmoidGate;
}
template <Prologue kP>
__global__ void __launch_bounds__(kStagedThreads, 3) quantize_rows_fp8_staged_kernel(const float* x, RowPrologue pro,
                                                                                  int64_t M, int64_t K, int mode,
                                                                                  uint8_t* xq, float* row_scale) {
  static_assert(elementwise(kP), "the staged form takes element-wise prologues only");
  extern __shared__ float4 staged[];  // group g's first 4 values at g, its last 4 at groups + g
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31;
  const int groups = static_cast<int>(K / 8);
  uint8_t* out = xq + r * K;
  if (r >= M) {
    for (int g = tid; g < groups; g += kStagedThreads) *reinterpret_cast<uint2*>(out + 8 * g) = make_uint2(0, 0);
    if (tid == 0) row_scale[r] = 1.0f;
    return;
  }
  const float* in = x + r * K;
  const float* aux = kP == Prologue::kPlain ? nullptr : pro.aux + r * K;
  const int steps = (groups + kStagedThreads - 1) / kStagedThreads;  // the same for every thread
  int emax = -1000;
  for (int j0 = 0; j0 < steps; j0 += kStagedUnroll) {
    float v[kStagedUnroll][8], u[kStagedUnroll][8];
#pragma unroll
    for (int p = 0; p < kStagedUnroll; ++p) {
      const int g = tid + (j0 + p) * kStagedThreads;
#pragma unroll
      for (int i = 0; i < 8; ++i) v[p][i] = u[p][i] = 0.0f;
      if (g < groups) {
        load8(in + 8 * g, v[p]);
        if constexpr (kP != Prologue::kPlain) load8(aux + 8 * g, u[p]);
      }
    }
#pragma unroll
    for (int p = 0; p < kStagedUnroll; ++p) {
      const int g = tid + (j0 + p) * kStagedThreads;
      const bool valid = g < groups;  // whole blocks: K % 32 == 0
      if constexpr (kP == Prologue::kSiluUp) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[p][i] = silu_f(v[p][i]) * u[p][i];
      } else if constexpr (kP == Prologue::kSigmoidGate) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[p][i] = v[p][i] * sigmoid_f(u[p][i]);
      }
      const int e = block_exponent8(v[p], valid, mode);
      if (valid) {
        emax = max(emax, e);
        staged[g] = make_float4(v[p][0], v[p][1], v[p][2], v[p][3]);
        staged[groups + g] = make_float4(v[p][4], v[p][5], v[p][6], v[p][7]);
      }
    }
  }
  __shared__ int top[32];
  const int ref = row_max_exponent(emax, top) - kMaxShift;  // its barrier orders the staging too
  for (int j = 0; j < steps; ++j) {
    const int g = tid + j * kStagedThreads;
    const bool valid = g < groups;
    float v[8] = {};
    if (valid) {
      const float4 a = staged[g], b = staged[groups + g];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    store_group8_e4m3(v, block_exponent8(v, valid, mode), ref, valid, lane, out + 8 * g);
  }
  if (tid == 0) row_scale[r] = ldexpf(1.0f, ref);
}

// Null passes: an optional output.
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Launches the register form for rows of K values with prologue kP: true, or false with
// nothing launched where it does not take the shape (K beyond 8 · 8 · kRegsThreads, K % 32 ≠ 0,
// x or the prologue's operands not 16-byte aligned, a gated norm whose heads are not a power of
// two of 8-value groups up to a warp, or that do not divide K).
template <Prologue kP>
bool launch_quantize_regs(const float* x, const RowPrologue& pro, int64_t M, int64_t Mp, int64_t K, int mode,
                          uint8_t* xq, float* row_scale, cudaStream_t s) {
  const RowGroupLayout layout = row_group_layout(K);
  const auto grid = static_cast<unsigned>(Mp);
  if (K % 32 != 0 || layout.groups == 0 || !aligned16(x)) return false;
  if (kP != Prologue::kPlain && kP != Prologue::kNorm && !aligned16(pro.aux)) return false;
  if (kP == Prologue::kGatedNorm && !gated_norm_groups_apply(8 * int64_t{pro.norm_lanes}, K, pro.norm_w)) return false;
  if ((kP == Prologue::kAddNorm || kP == Prologue::kNorm) &&
      (!aligned16(pro.norm_w) || !aligned16(pro.x_out) || (kP == Prologue::kAddNorm && !aligned16(pro.h_out))))
    return false;
  with_row_groups(layout, [&](auto g) {
    quantize_rows_fp8_regs_kernel<decltype(g)::value, kP>
        <<<grid, layout.threads, 0, s>>>(x, pro, M, K, mode, xq, row_scale);
  });
  STAVE_CUDA_LAUNCHED();
  return true;
}

// Launches the staged form for rows of K values with prologue kP (kPlain, kSiluUp or
// kSigmoidGate): true, or false with nothing launched where it does not take the shape (K % 32 ≠
// 0, K beyond kStagedUpToK, x or aux not 16-byte aligned).
constexpr int64_t kStagedUpToK = 32768;
template <Prologue kP>
bool launch_quantize_staged(const float* x, const RowPrologue& pro, int64_t M, int64_t Mp, int64_t K, int mode,
                            uint8_t* xq, float* row_scale, cudaStream_t s) {
  if (K % 32 != 0 || K > kStagedUpToK || !aligned16(x)) return false;
  if (kP != Prologue::kPlain && !aligned16(pro.aux)) return false;
  const auto bytes = static_cast<size_t>(K) * sizeof(float);
  STAVE_CUDA_CHECK(cudaFuncSetAttribute(quantize_rows_fp8_staged_kernel<kP>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  quantize_rows_fp8_staged_kernel<kP><<<static_cast<unsigned>(Mp), kStagedThreads, bytes, s>>>(x, pro, M, K, mode, xq,
                                                                                              row_scale);
  STAVE_CUDA_LAUNCHED();
  return true;
}

// With `staged`, rows from this length on take the staged form (where the register form would
// hold 8 groups a thread).
constexpr int64_t kStagedFromK = 8 * 4 * int64_t{kRegsThreads} + 32;
bool staged_applies(bool staged, Prologue kind, int64_t K) { return staged && K >= kStagedFromK && elementwise(kind); }

// Calls launch(std::integral_constant<Prologue, kind>{}) and returns its answer, so that a kernel
// templated on the prologue is launched with the instance for `kind` (as with_row_groups does for
// the groups).
template <class Launch>
bool with_prologue(Prologue kind, Launch&& launch) {
  switch (kind) {
    case Prologue::kPlain: return launch(std::integral_constant<Prologue, Prologue::kPlain>{});
    case Prologue::kSiluUp: return launch(std::integral_constant<Prologue, Prologue::kSiluUp>{});
    case Prologue::kSigmoidGate: return launch(std::integral_constant<Prologue, Prologue::kSigmoidGate>{});
    case Prologue::kGatedNorm: return launch(std::integral_constant<Prologue, Prologue::kGatedNorm>{});
    case Prologue::kAddNorm: return launch(std::integral_constant<Prologue, Prologue::kAddNorm>{});
    case Prologue::kNorm: return launch(std::integral_constant<Prologue, Prologue::kNorm>{});
  }
  return false;
}

// Rows of K values into E4M3 + 2^R_a per row: the register form where the row fits 8 · 8 ·
// 512 values and x is 16-byte aligned (form 0 or 1), else the two-pass warp form.
}  // namespace

void launch_quantize_rows_fp8(const float* x, int64_t M, int64_t Mp, int64_t K, int mode, uint8_t* xq,
                              float* row_scale, cudaStream_t s, int form, bool staged) {
  if (form == 0 && staged_applies(staged, Prologue::kPlain, K) &&
      launch_quantize_staged<Prologue::kPlain>(x, RowPrologue{}, M, Mp, K, mode, xq, row_scale, s))
    return;
  if (form != 2 && launch_quantize_regs<Prologue::kPlain>(x, RowPrologue{}, M, Mp, K, mode, xq, row_scale, s)) return;
  quantize_rows_fp8_kernel<<<static_cast<unsigned>(Mp), kRowWarps * 32, 0, s>>>(x, M, K, mode, xq, row_scale);
  STAVE_CUDA_LAUNCHED();
}

bool launch_quantize_formed(const float* x, const RowPrologue& pro, int64_t M, int64_t Mp, int64_t K, int mode,
                            uint8_t* xq, float* row_scale, cudaStream_t s, bool staged) {
  if (staged_applies(staged, pro.kind, K) && with_prologue(pro.kind, [&](auto p) {
        if constexpr (elementwise(decltype(p)::value))
          return launch_quantize_staged<decltype(p)::value>(x, pro, M, Mp, K, mode, xq, row_scale, s);
        else
          return false;
      }))
    return true;
  return with_prologue(pro.kind, [&](auto p) {
    return launch_quantize_regs<decltype(p)::value>(x, pro, M, Mp, K, mode, xq, row_scale, s);
  });
}

uint64_t activation_blocks_rounded() {
  unsigned long long n = 0;
  STAVE_CUDA_CHECK(cudaDeviceSynchronize());
  STAVE_CUDA_CHECK(cudaMemcpyFromSymbol(&n, g_rounded_blocks, sizeof(n)));
  return n;
}

namespace dev {

void quantize_rows_fp8(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode, uint8_t* xq, float* row_scale,
                       int form, cudaStream_t s) {
  if (M <= 0) return;
  const auto refuse = [&] {
    throw Error(ErrorKind::kInternal, "FP8 activation quantization: form " + std::to_string(form) +
                                          " does not take K " + std::to_string(K));
  };
  if (K % 32 != 0 || form < 0 || form > 3) refuse();
  if (form == 3) {
    if (!launch_quantize_staged<Prologue::kPlain>(x, RowPrologue{}, M, M, K, mode_code(mode), xq, row_scale, s))
      refuse();
    return;
  }
  if (form == 1) {
    if (!launch_quantize_regs<Prologue::kPlain>(x, RowPrologue{}, M, M, K, mode_code(mode), xq, row_scale, s))
      refuse();
    return;
  }
  launch_quantize_rows_fp8(x, M, M, K, mode_code(mode), xq, row_scale, s, form);
}

}  // namespace dev
}  // namespace stave::cuda
