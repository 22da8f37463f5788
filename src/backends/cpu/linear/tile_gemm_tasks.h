// The scaffolding shared by the blocked, multithreaded drivers of the AMX-BF16 kernels
// (bf16_tile_gemm.h for BF16 weights, w4a4_tile_gemm.h for MXFP4 W4A4): both put the weight in
// the A operand and the activation in the B operand, so C tiles hold yᵀ, and both walk the
// output the same way:
//  - the output is cut into 32 × 32 blocks (32 weight rows = 32 output columns, 32 activation
//    rows), four 16 × 16 C tiles each (tile 2i + j = output columns 16i.., rows 16j..);
//  - tasks of ng weight blocks × mg activation blocks are spread over OpenMP threads (dynamic
//    schedule); each task walks K in chunks of KS 32-deep steps;
//  - between chunks a C block lives in a per-thread fp32 buffer; after the last chunk it is
//    written to y with the bias (write_c_block).
// What differs is a per-thread Chunk (made once per thread by make_chunk()):
//   void load(int64_t nb0, int64_t nb1, int64_t ks0, int64_t kss);
//     // the A source of weight blocks nb0 .. nb1 − 1 for steps ks0 .. ks0 + kss − 1
//   template <class Tiles> void mac(Tiles& t, int64_t i, int64_t mb, int64_t ks0, int64_t kss);
//     // C += weight block nb0 + i × activation block mb over those steps (C tiles loaded)
// and the task shape (the plan; tile_plan_for_ng computes the M split for a chosen ng).
// Tiles: the tile unit of bf16_tile_gemm.h (zero_c, load_c, store_c, load_a, load_b, dp).
// Anonymous namespace, as the drivers: each includer gets its own copy compiled with its flags.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

// How the output is cut into tasks: ng weight blocks × mg activation blocks (32 rows each).
struct TilePlan {
  int64_t nblocks = 0, mblocks = 0, ng = 1, ngroups = 1, mg = 1, mgroups = 1;
  int64_t tasks() const { return ngroups * mgroups; }
};

// The plan for N output columns, padded_rows activation rows (a multiple of 32) and ng weight
// blocks per task: M is split into enough groups that there are about `target_tasks` tasks (at
// most one group per activation block), each of at most mg_max blocks.
inline TilePlan tile_plan_for_ng(int64_t N, int64_t padded_rows, int64_t ng, int64_t target_tasks, int64_t mg_max) {
  TilePlan p;
  p.nblocks = (N + 31) / 32;
  p.mblocks = padded_rows / 32;
  p.ng = ng;
  p.ngroups = (p.nblocks + ng - 1) / ng;
  p.mgroups = std::clamp<int64_t>((target_tasks + p.ngroups - 1) / p.ngroups, 1, p.mblocks);
  p.mg = std::min(mg_max, (p.mblocks + p.mgroups - 1) / p.mgroups);
  p.mgroups = (p.mblocks + p.mg - 1) / p.mg;
  return p;
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

// y[M, w.out] from the plan's tasks over ksteps 32-deep steps, KS per chunk (see the top).
template <class Tiles, class MakeChunk>
void tile_gemm_tasks(const TilePlan& plan, int64_t ksteps, int64_t KS, const LinearWeight& w, int64_t M, float* y,
                     MakeChunk make_chunk) {
  const int64_t ng = plan.ng, mg = plan.mg;
#pragma omp parallel
  {
    Tiles t;
    auto chunk = make_chunk();
    std::vector<float> cbuf(static_cast<size_t>(mg * ng * 1024));  // [mb][nb][4 tiles][16][16]
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < plan.tasks(); ++task) {
      const int64_t nb0 = (task / plan.mgroups) * ng, nb1 = std::min(plan.nblocks, nb0 + ng);
      const int64_t mb0 = (task % plan.mgroups) * mg, mb1 = std::min(plan.mblocks, mb0 + mg);
      for (int64_t ks0 = 0; ks0 < ksteps; ks0 += KS) {
        const int64_t kss = std::min(KS, ksteps - ks0);
        const bool first = ks0 == 0, last = ks0 + kss == ksteps;
        chunk.load(nb0, nb1, ks0, kss);
        for (int64_t mb = mb0; mb < mb1; ++mb)
          for (int64_t nb = nb0; nb < nb1; ++nb) {
            float* c = cbuf.data() + ((mb - mb0) * ng + (nb - nb0)) * 1024;
            if (first)
              t.zero_c();
            else
              t.load_c(c);
            chunk.mac(t, nb - nb0, mb, ks0, kss);
            t.store_c(c);
            if (last) write_c_block(c, w, mb * 32, nb * 32, M, y);
          }
      }
    }
  }
}

}  // namespace
}  // namespace stave::cpu::kern
