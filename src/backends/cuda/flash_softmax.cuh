// The online softmax of the flash attention kernels (attention_flash.cu, attention_flash_bf16.cu,
// attention_flash_wgmma.cu), over one tile of scores in the m16n8 accumulator fragment that
// mma.sync and wgmma share: a thread holds rows g and g + 8 of its warp's 16 (lane = 4 g + t), and
// s[n][e] is the score of key 8 n + 2 t + (e & 1) of row e >> 1, so each row's scores lie in one
// quad of lanes.
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

namespace stave::cuda::dev::flash {

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Two floats as one bf16x2 register: `lo` (the lower index) in the low half, as mma reads it.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Raises a row's running max to m (the largest of it and the tile's scaled scores): the shift the
// tile's exponentials take, and the factor the row's output and sum so far are multiplied by.
template <bool kBase2>
__device__ __forceinline__ void raise_row_max(float m, float& row_max, float& shift, float& rescale) {
  shift = m == -INFINITY ? 0.0f : m;  // a row with no visible key yet keeps p = 0
  rescale = kBase2 ? exp2f(row_max - shift) : expf(row_max - shift);
  row_max = m;
}

// One tile of kKeys keys from j0 on: scale the scores and mask those past key_end (and, causal,
// past each row's last visible key limit[r]), raise the rows' running max, turn s into
// p = exp(s − max) and add them to the rows' sums. kBase2: the scale includes log2(e) and the
// exponential is exp2f, else expf. rescale: what the output so far is to be multiplied by.
template <int kKeys, bool kBase2>
__device__ __forceinline__ void softmax_tile(float (&s)[kKeys / 8][4], int j0, int key_end, bool causal,
                                             const int (&limit)[2], float scale, int t, float (&row_max)[2],
                                             float (&row_sum)[2], float (&rescale)[2]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1, key = j0 + n * 8 + 2 * t + (e & 1);
      const bool visible = key < key_end && (!causal || key <= limit[r]);
      s[n][e] = visible ? s[n][e] * scale : -INFINITY;
      tile_max[r] = fmaxf(tile_max[r], s[n][e]);
    }
  float shift[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    raise_row_max<kBase2>(fmaxf(row_max[r], quad_max(tile_max[r])), row_max[r], shift[r], rescale[r]);
  float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = kBase2 ? exp2f(s[n][e] - shift[e >> 1]) : expf(s[n][e] - shift[e >> 1]);
      tile_sum[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * rescale[r] + quad_sum(tile_sum[r]);
}

// softmax_tile's base-2 form with fewer instructions per score, for the warp-group MMA kernel
// (attention_flash_wgmma.cu), whose tensor cores wait while it runs:
// - the scale goes into one FMA per score, p = exp2(fma(s, scale, −max)), where softmax_tile
//   rounds s · scale first. The running max is the same number: rounding is monotonic and
//   scale > 0, so the largest raw score times the scale is the largest scaled score;
// - kMask = false for a tile that every row of the caller sees whole (no key past key_end or past
//   a row's limit): no per-score tests. Causal masking only.
template <int kKeys, bool kMask>
__device__ __forceinline__ void softmax_tile_fma(float (&s)[kKeys / 8][4], int j0, int key_end, const int (&limit)[2],
                                                 float scale, int t, float (&row_max)[2], float (&row_sum)[2],
                                                 float (&rescale)[2]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >> 1;
      if constexpr (kMask) {
        const int key = j0 + n * 8 + 2 * t + (e & 1);
        if (key >= key_end || key > limit[r]) s[n][e] = -INFINITY;
      }
      tile_max[r] = fmaxf(tile_max[r], s[n][e]);
    }
  float shift[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    raise_row_max<true>(fmaxf(row_max[r], quad_max(tile_max[r]) * scale), row_max[r], shift[r], rescale[r]);
  float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = exp2f(fmaf(s[n][e], scale, -shift[e >> 1]));
      tile_sum[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * rescale[r] + quad_sum(tile_sum[r]);
}

// The output's rows g and g + 8 (kTiles n8 tiles of them) times their rescale factors.
template <int kTiles>
__device__ __forceinline__ void rescale_rows(float (&o)[kTiles][4], const float (&rescale)[2]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    o[n][0] *= rescale[0];
    o[n][1] *= rescale[0];
    o[n][2] *= rescale[1];
    o[n][3] *= rescale[1];
  }
}

// P (the scores rounded to BF16) as mma.sync m16n8k16's A fragments, one per 16 keys.
template <int kKeys>
__device__ __forceinline__ void pack_p(const float (&s)[kKeys / 8][4], uint32_t (&p)[kKeys / 16][4]) {
#pragma unroll
  for (int kb = 0; kb < kKeys / 16; ++kb) {
    p[kb][0] = pack_bf16(s[2 * kb][0], s[2 * kb][1]);
    p[kb][1] = pack_bf16(s[2 * kb][2], s[2 * kb][3]);
    p[kb][2] = pack_bf16(s[2 * kb + 1][0], s[2 * kb + 1][1]);
    p[kb][3] = pack_bf16(s[2 * kb + 1][2], s[2 * kb + 1][3]);
  }
}

}  // namespace stave::cuda::dev::flash
