// The blocked, multithreaded driver of the AMX-BF16 linear kernel (amx/linear_amx.cpp), written
// against an abstract tile unit so that the same loops, layouts and edge handling also run with
// a scalar emulation of the tiles (tests/test_cpu_linear.cpp) on CPUs without AMX. Like
// float_gemm.h it lives in an anonymous namespace: each includer gets its own copy compiled
// with its own flags.
//
// Product: the weight is the A operand and the activation the B operand, so C tiles hold
// yᵀ: C[n][m] = Σ_k W[n][k] · x[m][k]. A BF16 weight row is already what an A tile row needs
// (32 consecutive bf16 of one output row), so full 32-row weight blocks are read in place from
// the mapped checkpoint (tile stride = the row size); only the edge blocks (rows past out_features,
// or a last K step past in_features) are copied into a zero-padded per-thread scratch. The
// activation comes pre-split into hi + lo in the B-tile layout (SplitActivations), and every
// 32-deep step is two tdpbf16ps passes into the same C tiles: W·hi, then W·lo.
//
// Registers: C = 4 tiles (2 weight-row halves × 2 activation-row halves: a 32 × 32 output block),
// A = 2 tiles (32 weight rows × 32 k), B = 2 tiles (32 activation rows × 32 k; hi, then lo).
// Work (the task loop is tile_gemm_tasks.h's): tasks of ng weight blocks × mg activation blocks
// (32 rows each) spread over OpenMP threads; K is walked in chunks of KS steps (256 columns): the
// activation chunk of one 32-row block (32 KiB, hi + lo) stays in L1 across the ng weight
// blocks, the weight chunk (ng · 16 KiB) in L2 across the mg activation blocks. Partial C blocks
// live in a per-thread fp32 buffer between chunks; after the last chunk they are transposed into
// y and the bias is added.
// Every output element is thus one fp32 chain: 2·ceil(K/32)·32 products (exact: bf16 × bf16 fits
// fp32) added in order, plus the bias.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "backends/cpu/linear/tile_gemm_tasks.h"
#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

constexpr int64_t kBf16TileKs = 8;     // 32-deep steps per K chunk (256 columns)
constexpr int64_t kBf16TileNgMax = 4;  // weight blocks per task at most
constexpr int64_t kBf16TileMgMax = 16;  // activation blocks per task at most (512 rows)

// Task shape: up to 4 weight blocks per task, fewer (then M split as well) when that leaves
// fewer than ~2 tasks per thread; M split for ~4 tasks per thread.
inline TilePlan bf16_tile_plan(int64_t N, int64_t padded_rows, int64_t threads) {
  const int64_t nblocks = (N + 31) / 32, mblocks = padded_rows / 32;
  int64_t ng = std::min(kBf16TileNgMax, nblocks);
  while (ng > 1 && (nblocks + ng - 1) / ng * mblocks < 2 * threads) ng /= 2;
  return tile_plan_for_ng(N, padded_rows, ng, 4 * threads, kBf16TileMgMax);
}

// One thread's A sources for a task's K chunk: a full 32-row weight block is read in place from
// w (stride = the row size), an edge block (rows past out_features, or a last K step past
// in_features) is copied into a zero-padded scratch. mac multiplies each step by hi, then lo.
struct Bf16TileChunk {
  const LinearWeight& w;
  const SplitActivations& s;
  std::vector<uint16_t> wpad = std::vector<uint16_t>(static_cast<size_t>(kBf16TileNgMax * 32 * kBf16TileKs * 32));
  const uint16_t* asrc[kBf16TileNgMax] = {};
  int64_t astride[kBf16TileNgMax] = {};

  void load(int64_t nb0, int64_t nb1, int64_t ks0, int64_t kss) {
    const int64_t N = w.out, K = w.in;
    const uint16_t* wdata = static_cast<const uint16_t*>(w.data);
    const int64_t k0 = ks0 * 32, kc = std::min(kss * 32, K - k0);  // kc < kss·32: K tail
    for (int64_t nb = nb0; nb < nb1; ++nb) {
      const int64_t i = nb - nb0, n0 = nb * 32, rows = std::min<int64_t>(32, N - n0);
      if (rows == 32 && kc == kss * 32) {
        asrc[i] = wdata + n0 * K + k0;
        astride[i] = K * 2;
      } else {
        uint16_t* pad = wpad.data() + i * 32 * kBf16TileKs * 32;
        const int64_t ld = kss * 32;
        for (int64_t r = 0; r < 32; ++r) {
          uint16_t* d = pad + r * ld;
          const int64_t cols = r < rows ? kc : 0;
          if (cols > 0) std::memcpy(d, wdata + (n0 + r) * K + k0, static_cast<size_t>(cols) * 2);
          std::memset(d + cols, 0, static_cast<size_t>(ld - cols) * 2);
        }
        asrc[i] = pad;
        astride[i] = ld * 2;
      }
    }
  }

  template <class Tiles>
  void mac(Tiles& t, int64_t i, int64_t mb, int64_t ks0, int64_t kss) const {
    const uint16_t* act = s.block(mb, ks0);
    const uint16_t* a = asrc[i];
    for (int64_t ks = 0; ks < kss; ++ks) {
      t.load_a(a + ks * 32, astride[i]);
      const uint16_t* b = act + ks * SplitActivations::kBlock;
      t.load_b(b);  // hi
      t.dp();
      t.load_b(b + 1024);  // lo
      t.dp();
    }
  }
};

// Tiles must provide (constructed once per OpenMP thread, inside the parallel region):
//   void zero_c();                     // the four C tiles
//   void load_c(const float* c);       // C tile t from c + 256·t (16 × 16 fp32, 64-byte rows)
//   void store_c(float* c);            // the same layout
//   void load_a(const uint16_t* a, int64_t stride_bytes);  // A0 = 16 rows at a, A1 = 16 rows
//                                      // at a + 16·stride_bytes; 64 bytes (32 bf16) per row
//   void load_b(const uint16_t* b);    // B0 = b[0..512), B1 = b[512..1024): 16 rows × 64 bytes
//   void dp();                         // C[2i + j] += A_i · B_j (tdpbf16ps) for i, j ∈ {0, 1}
template <class Tiles>
void bf16_tile_gemm(const LinearWeight& w, const SplitActivations& s, int64_t M, float* y) {
  const TilePlan plan = bf16_tile_plan(w.out, s.padded_rows, omp_get_max_threads());
  tile_gemm_tasks<Tiles>(plan, s.ksteps, kBf16TileKs, w, M, y, [&] { return Bf16TileChunk{w, s}; });
}

}  // namespace
}  // namespace stave::cpu::kern
