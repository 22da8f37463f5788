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
// Work: tasks of NG weight blocks × MG activation blocks (32 rows each) spread over OpenMP
// threads; K is walked in chunks of KS steps (256 columns): the activation chunk of one 32-row
// block (32 KiB, hi + lo) stays in L1 across the NG weight blocks, the weight chunk (NG · 16 KiB)
// in L2 across the MG activation blocks. Partial C blocks live in a per-thread fp32 buffer
// between chunks; after the last chunk they are transposed into y and the bias is added.
// Every output element is thus one fp32 chain: 2·ceil(K/32)·32 products (exact: bf16 × bf16 fits
// fp32) added in order, plus the bias.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/linear/kernels.h"
#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

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
  constexpr int64_t KS = 8;       // 32-deep steps per K chunk
  constexpr int64_t MG_MAX = 16;  // activation blocks per task at most (512 rows)
  const int64_t N = w.out, K = w.in;
  const int64_t ksteps = s.ksteps, mblocks = s.padded_rows / 32, nblocks = (N + 31) / 32;
  const uint16_t* wdata = static_cast<const uint16_t*>(w.data);

  // Task shape: up to 4 weight blocks per task, fewer (then M split as well) when that leaves
  // fewer than ~2 tasks per thread.
  const int64_t threads = omp_get_max_threads();
  int64_t ng = std::min<int64_t>(4, nblocks);
  while (ng > 1 && (nblocks + ng - 1) / ng * mblocks < 2 * threads) ng /= 2;
  const int64_t ngroups = (nblocks + ng - 1) / ng;
  int64_t mgroups = std::clamp<int64_t>((4 * threads + ngroups - 1) / ngroups, 1, mblocks);
  int64_t mg = std::min(MG_MAX, (mblocks + mgroups - 1) / mgroups);
  mgroups = (mblocks + mg - 1) / mg;
  const int64_t tasks = ngroups * mgroups;

#pragma omp parallel
  {
    Tiles t;
    std::vector<float> cbuf(static_cast<size_t>(mg * ng * 1024));  // [mb][nb][4 tiles][16][16]
    std::vector<uint16_t> wpad(static_cast<size_t>(ng * 32 * KS * 32));  // edge weight blocks
    const uint16_t* asrc[4];
    int64_t astride[4];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t nb0 = (task / mgroups) * ng, nb1 = std::min(nblocks, nb0 + ng);
      const int64_t mb0 = (task % mgroups) * mg, mb1 = std::min(mblocks, mb0 + mg);
      for (int64_t ks0 = 0; ks0 < ksteps; ks0 += KS) {
        const int64_t kss = std::min(KS, ksteps - ks0);
        const int64_t k0 = ks0 * 32, kc = std::min(kss * 32, K - k0);  // kc < kss·32: K tail
        const bool first = ks0 == 0, last = ks0 + kss == ksteps;
        // The A source of each weight block for this chunk: in place, or a zero-padded copy.
        for (int64_t nb = nb0; nb < nb1; ++nb) {
          const int64_t i = nb - nb0, n0 = nb * 32, rows = std::min<int64_t>(32, N - n0);
          if (rows == 32 && kc == kss * 32) {
            asrc[i] = wdata + n0 * K + k0;
            astride[i] = K * 2;
          } else {
            uint16_t* pad = wpad.data() + i * 32 * KS * 32;
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
        for (int64_t mb = mb0; mb < mb1; ++mb) {
          const uint16_t* act = s.block(mb, ks0);
          for (int64_t nb = nb0; nb < nb1; ++nb) {
            const int64_t i = nb - nb0;
            float* c = cbuf.data() + ((mb - mb0) * ng + i) * 1024;
            if (first)
              t.zero_c();
            else
              t.load_c(c);
            const uint16_t* a = asrc[i];
            for (int64_t ks = 0; ks < kss; ++ks) {
              t.load_a(a + ks * 32, astride[i]);
              const uint16_t* b = act + ks * SplitActivations::kBlock;
              t.load_b(b);  // hi
              t.dp();
              t.load_b(b + 1024);  // lo
              t.dp();
            }
            t.store_c(c);
            if (last) {
              // C tile (ih, jh)[nn][mm] = y[32·mb + 16·jh + mm][32·nb + 16·ih + nn] − bias.
              const int64_t n0 = nb * 32, cols = std::min<int64_t>(32, N - n0);
              for (int64_t r = 0; r < 32 && mb * 32 + r < M; ++r) {
                float* yr = y + (mb * 32 + r) * N + n0;
                const float* cr = c + (r / 16) * 256 + (r % 16);
                for (int64_t j = 0; j < cols; ++j) {
                  const float v = cr[(j / 16) * 512 + (j % 16) * 16];
                  yr[j] = w.bias ? v + w.bias[n0 + j] : v;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stave::cpu::kern
