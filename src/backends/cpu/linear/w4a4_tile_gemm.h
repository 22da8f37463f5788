// The blocked, multithreaded driver of the AMX-BF16 MXFP4 W4A4 kernel
// (amx/linear_w4a4_amx_bf16.cpp), written against an abstract tile unit (the interface of
// bf16_tile_gemm.h) so that the same loops, layouts and edges also run with a scalar emulation
// of the tiles (tests/test_cpu_linear.cpp) on CPUs without AMX. Anonymous namespace: each
// includer gets its own copy compiled with its own flags.
//
// Why bf16: every Quark MXFP4 value E2M1 · 2^e (the weight's and the QDQ'd activation's) is
// exactly a bf16 number and the product of two bf16 numbers is exact in fp32, so tdpbf16ps
// forms the exact W4A4 products and adds them into fp32 C tiles across all of K: no per-block
// integer dot, store and rescale (the AMX-INT8 kernel's cost).
//
// Product: the weight is the A operand and the activation the B operand (as in
// bf16_tile_gemm.h), so C tiles hold yᵀ: C[n][m] = Σ_k W[n][k] · x[m][k].
//  - A: per task and K chunk, the task's weight blocks (32 output columns each) are expanded from
//    packed MXFP4 into row-major bf16 A tiles (expand_mxfp4_bf16_rows_avx512: 16 weight rows ×
//    32 columns, 64-byte rows) in a per-thread panel, then reused for every activation block of
//    the task. Row-major is what a packed row already is: one table lookup per row and no
//    transpose (a VNNI B tile of the weight needs a 16 × 16 byte transpose per tile; on the
//    2-core EPYC both cost ~45 ns per 16 × 32 tile, single thread).
//  - B: the activation QDQ'd once per call and stored as bf16 B tiles in the VNNI layout
//    (activations_to_bf16_avx512; rows padded to 32 with zeros): per 32 rows × 32 columns one
//    contiguous 2 KiB block = B0 (activation rows 0..15) then B1 (rows 16..31), so a K chunk of
//    one 32-row block is contiguous (row-major rows K·2 bytes apart would share L1 sets).
// Registers: C = 4 tiles (2 weight-row halves × 2 activation-row halves: a 32 × 32 output
// block, tile 2i + j = output columns 16i.., rows 16j..), A = 2 tiles, B = 2 tiles.
// Work: tasks of ng weight blocks × mg activation blocks over OpenMP threads (dynamic). K is
// walked in chunks of KS steps (512 columns): the weight chunk (ng · KS · 2 KiB ≤ 256 KiB) stays
// in L2 across the task's activation blocks, the activation chunk of one 32-row block (32 KiB)
// in L1 across the ng weight blocks. Partial C blocks live in a per-thread fp32 buffer between
// chunks; after the last chunk they are written to y with the bias.
// Numerics: each output is one fp32 chain of K exact products (two per tdpbf16ps step per
// element, in k order) plus the bias: the numerics of linear_w4a4_bf16_avx512. tdpbf16ps treats
// denormal inputs as zero and flushes denormal results: terms below 2^-126 (block scales at the
// bottom of E8M0's range) are lost, far inside fast precision's bounds.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

constexpr int64_t kW4A4TileKs = 16;     // 32-deep steps per K chunk (512 columns)
constexpr int64_t kW4A4TileNgMax = 8;   // 32-column weight blocks per task at most (256 columns)
constexpr int64_t kW4A4TileMgMax = 32;  // 32-row activation blocks per task at most (1024 rows)

// How the output is cut into tasks: ng weight blocks × mg activation blocks.
struct W4A4TilePlan {
  int64_t nblocks = 0, mblocks = 0, ng = 1, ngroups = 1, mg = 1, mgroups = 1;
  int64_t tasks() const { return ngroups * mgroups; }
};

// Wide tasks first: each activation chunk is read from L3 / memory once per weight group (one
// 32 KiB chunk per ng · 64 tile products: at ng = 2 on 16 cores, an estimated ~200 GB/s), and each
// M split expands the weight once more. So: ng = 8 or 4 blocks if the weight groups alone keep
// the threads evenly busy (ceil(groups / threads) rounds at least 80 % full); failing that (few
// output columns), the widest ng that still gives every thread a group; M is split only where
// even ng = 1 leaves threads idle.
inline W4A4TilePlan w4a4_tile_plan(int64_t N, int64_t padded_rows, int64_t threads) {
  W4A4TilePlan p;
  p.nblocks = (N + 31) / 32;
  p.mblocks = padded_rows / 32;
  const auto finish = [&](int64_t ng) {
    p.ng = ng;
    p.ngroups = (p.nblocks + ng - 1) / ng;
    p.mgroups = std::clamp<int64_t>((threads + p.ngroups - 1) / p.ngroups, 1, p.mblocks);
    p.mg = std::min(kW4A4TileMgMax, (p.mblocks + p.mgroups - 1) / p.mgroups);
    p.mgroups = (p.mblocks + p.mg - 1) / p.mg;
    return p;
  };
  for (int64_t ng : {kW4A4TileNgMax, kW4A4TileNgMax / 2}) {
    const int64_t groups = (p.nblocks + ng - 1) / ng;
    const int64_t rounds = (groups + threads - 1) / threads;
    if (groups >= threads && groups * 100 >= rounds * threads * 80) return finish(ng);
  }
  int64_t ng = std::min(kW4A4TileNgMax, p.nblocks);
  while (ng > 1 && (p.nblocks + ng - 1) / ng < threads) ng /= 2;
  return finish(ng);
}

// Writes the 32 × 32 C block c (4 tiles of 16 × 16 fp32; tile 2i + j, element [nn][mm] =
// y[m0 + 16j + mm][n0 + 16i + nn] − bias) to y rows m0.. (< M) and columns n0.. (< N),
// adding the bias.
inline void write_c_block(const float* c, const LinearWeight& w, int64_t m0, int64_t n0, int64_t M, float* y) {
  const int64_t N = w.out, cols = std::min<int64_t>(32, N - n0);
  for (int64_t r = 0; r < 32 && m0 + r < M; ++r) {
    float* yr = y + (m0 + r) * N + n0;
    const float* cr = c + (r / 16) * 256 + (r % 16);
    for (int64_t j = 0; j < cols; ++j) {
      const float v = cr[(j / 16) * 512 + (j % 16) * 16];
      yr[j] = w.bias ? v + w.bias[n0 + j] : v;
    }
  }
}

// y[M, N] = act[M, K] · Wᵀ (+ bias) for an MXFP4 weight w. act: bf16 in the B-tile blocks of
// activations_to_bf16_avx512 (padded_rows a multiple of 32, rows ≥ M zero). Tiles: the
// interface of bf16_tile_gemm.h:
//   zero_c(), load_c(c), store_c(c)  // C tile t at c + 256·t (16 × 16 fp32)
//   load_a(a, stride_bytes)          // A0 = 16 rows at a, A1 = the 16 rows after; 32 bf16 each
//   load_b(b)                        // B0 = b[0..512), B1 = b[512..1024)
//   dp()                             // C[2i + j] += A_i · B_j (tdpbf16ps)
template <class Tiles>
void w4a4_tile_gemm(const LinearWeight& w, const uint16_t* act, int64_t padded_rows, int64_t M, float* y) {
  constexpr int64_t KS = kW4A4TileKs;
  const int64_t K = w.in, ksteps = K / 32;  // MXFP4: K is a multiple of 32
  const W4A4TilePlan plan = w4a4_tile_plan(w.out, padded_rows, omp_get_max_threads());
  const int64_t ng = plan.ng, mg = plan.mg;

#pragma omp parallel
  {
    Tiles t;
    // panel[(i·KS + ks)·1024 + h·512 ..]: A tile h (weight rows 16h..16h + 15 of block i) of
    // step ks of the chunk.
    std::vector<uint16_t> panel(static_cast<size_t>(ng * KS * 1024));
    std::vector<float> cbuf(static_cast<size_t>(mg * ng * 1024));  // [mb][nb][4 tiles][16][16]
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < plan.tasks(); ++task) {
      const int64_t nb0 = (task / plan.mgroups) * ng, nb1 = std::min(plan.nblocks, nb0 + ng);
      const int64_t mb0 = (task % plan.mgroups) * mg, mb1 = std::min(plan.mblocks, mb0 + mg);
      for (int64_t ks0 = 0; ks0 < ksteps; ks0 += KS) {
        const int64_t kss = std::min(KS, ksteps - ks0);
        const bool first = ks0 == 0, last = ks0 + kss == ksteps;
        // Expand this chunk of the task's weight blocks once (rows ≥ N become zeros).
        for (int64_t nb = nb0; nb < nb1; ++nb)
          for (int64_t ks = 0; ks < kss; ++ks)
            for (int64_t h = 0; h < 2; ++h)
              expand_mxfp4_bf16_rows_avx512(w, nb * 32 + 16 * h, ks0 + ks,
                                            panel.data() + ((nb - nb0) * KS + ks) * 1024 + h * 512);
        for (int64_t mb = mb0; mb < mb1; ++mb) {
          const uint16_t* b = act + (mb * ksteps + ks0) * 1024;  // this chunk's blocks, contiguous
          for (int64_t nb = nb0; nb < nb1; ++nb) {
            const int64_t i = nb - nb0;
            float* c = cbuf.data() + ((mb - mb0) * ng + i) * 1024;
            if (first)
              t.zero_c();
            else
              t.load_c(c);
            const uint16_t* a = panel.data() + i * KS * 1024;
            for (int64_t ks = 0; ks < kss; ++ks) {
              t.load_a(a + ks * 1024, 64);
              t.load_b(b + ks * 1024);
              t.dp();
            }
            t.store_c(c);
            if (last) write_c_block(c, w, mb * 32, nb * 32, M, y);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stave::cpu::kern
