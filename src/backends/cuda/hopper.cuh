// Hopper (sm_90a) building blocks in PTX: mbarriers, TMA tile loads, the 128-byte swizzled
// shared-memory layout and its wgmma descriptor, and the FP8 warp-group MMA. Used by the fused
// MXFP4 GEMM (gemm_mxfp4_fp8.cu). PTX ISA 8.x, "Asynchronous warpgroup level matrix" and
// "Tensor copy" sections.
#pragma once
#include <cuda.h>  // CUtensorMap (the type only; the encoder is fetched at run time)
#include <cuda_runtime.h>

#include <cstdint>

namespace stave::cuda::hopper {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// --- mbarriers ---

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
// Makes the barriers' initialisation visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Arrives and announces `bytes` of TMA transactions that complete the phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// Waits until the phase of parity `phase` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(phase)
      : "memory");
}

// --- TMA ---

// A box of a 2-D tensor map at element coordinates (c0 inner, c1 outer) into shared memory;
// the transaction bytes complete on `bar`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(const CUtensorMap* map, void* dst, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Generic-proxy writes to shared memory (st.shared) made visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// A barrier over the first `threads` threads of the block (id ≠ 0: __syncthreads keeps 0). The
// non-.aligned form: threads of a warp may arrive apart (after a wait loop each left on its own;
// `bar.sync` is barrier.sync.aligned, which requires the warp to execute it together).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Moves registers between warp groups (setmaxnreg): each warp group of a kernel whose roles differ
// (a TMA producer needs few, MMA consumers many) asks for its count; every warp of the group
// executes it together, N a multiple of 8 in [24, 256].
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// --- the 128-byte swizzle (TMA's CU_TENSOR_MAP_SWIZZLE_128B, wgmma's layout type 1) ---
//
// A K-major tile of rows of 128 bytes, 1024-byte aligned: the 16-byte chunk j of row r lies at
// r · 128 + ((j ^ (r % 8)) · 16).
__device__ __forceinline__ uint32_t sw128_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

// The shared-memory matrix descriptor of such a tile starting at `addr` (its k-th 32-byte
// step: addr + 32 k): groups of 8 rows 1024 bytes apart (stride byte offset), leading byte
// offset unused by the swizzled K-major form (1), layout type 1 = 128-byte swizzle.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr >> 4) & 0x3FFF);
  d |= static_cast<uint64_t>(1) << 16;
  d |= static_cast<uint64_t>(1024 >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// --- warp-group MMA ---

// wgmma's instructions are .sync.aligned: every thread of the warp executes them together, so
// the warp is reconverged first (its threads may have left a wait loop apart).
__device__ __forceinline__ void wgmma_fence() {
  __syncwarp();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed groups of this warp's MMAs are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  __syncwarp();  // (as wgmma_fence)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wgmma_wait_all() { wgmma_wait<0>(); }
// Tells the compiler a register is read or written outside wgmma here (orders it around the
// asynchronous MMA without serialising it).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// The 64 fp32 accumulators of an m64n128 MMA: wgmma's operand list (asm operands %0 … %63) and
// the asm outputs that bind them to d[0 … 63]. For the two MMA forms below; undefined after them.
#define STAVE_WGMMA_D64                                                                                            \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
  "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57," \
  "%58,%59,%60,%61,%62,%63}"
#define STAVE_WGMMA_D64_OUT(d)                                                                                      \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),        \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),        \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),       \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),       \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),       \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),       \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),       \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d[64] (+)= A[64 × 32] · B[128 × 32]ᵀ, E4M3 × E4M3 with fp32 accumulation, both operands
// K-major in shared memory. accumulate false: d = A·Bᵀ (the instruction's own zeroing, so no
// other instruction writes the accumulator). Fragment: warp w of the group holds rows
// 16 w + lane / 4 (+ 8); d[4 j + {0, 1}] columns 8 j + 2 (lane % 4) + {0, 1} of the first
// row, d[4 j + {2, 3}] of the second.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      STAVE_WGMMA_D64 ",\n"
      "%64, %65, p, 1, 1;\n}\n"
      : STAVE_WGMMA_D64_OUT(d)
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// The same with A from registers (wgmma's register-source form): a[j] holds four E4M3 bytes of A
// in the layout of CUTLASS's ALayout_64x32 (rs_fragment.h). The hardware reads a[] while the MMA
// runs: they must not be written again before a wgmma_wait that covers it (the caller keeps
// them alive with fence_operand after that wait).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                         bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      STAVE_WGMMA_D64 ",\n"
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : STAVE_WGMMA_D64_OUT(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(static_cast<int>(accumulate)));
}

#undef STAVE_WGMMA_D64
#undef STAVE_WGMMA_D64_OUT

}  // namespace stave::cuda::hopper
