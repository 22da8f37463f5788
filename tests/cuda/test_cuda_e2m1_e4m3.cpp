// The fused MXFP4 GEMM's expansion (src/backends/cuda/e2m1_e4m3.h), run on the host: every pair
// of E2M1 codes in every word position under every shift against an E4M3 encoder written here
// from the format's definition, and the block form's byte order. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/e2m1_e4m3.h"
#include "backends/cuda/quantize_fp8.h"
#include "backends/cuda/rs_fragment.h"

namespace stave {
namespace {

constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// E4M3 (bias 7, 3 mantissa bits, subnormals of 2^-9) of a value it represents exactly.
uint8_t e4m3_of(float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::fabs(v);
  if (a == 0.0f) return sign;
  int e = 0;
  const float f = std::frexp(a, &e);  // a = f · 2^e, f in [0.5, 1)
  const int E = e - 1;                 // a = (2f) · 2^E, 2f in [1, 2)
  if (E < -6) return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::lround(a / 0x1p-9f)));
  const int mant = static_cast<int>(std::lround((2.0f * f - 1.0f) * 8.0f));
  return static_cast<uint8_t>(sign | ((E + 7) << 3) | mant);
}

uint8_t expected_byte(int code, int d) {
  const float v = kE2M1Values[code & 7] * std::ldexp(1.0f, d);
  return e4m3_of((code & 8) ? -v : v);
}

uint8_t byte_of(uint32_t w, int i) { return static_cast<uint8_t>(w >> (8 * i)); }

TEST(E2m1ToE4m3, ShiftTablesMatchTheFormat) {
  for (int d = cuda::kMinShift; d <= cuda::kMaxShift; ++d) {
    const uint2 t = cuda::e4m3_shift_table(d);
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(byte_of(c < 4 ? t.x : t.y, c % 4), expected_byte(c, d)) << "shift " << d << " code " << c;
  }
}

// A block's shift against its row's reference exponent: itself inside [kMinShift, kMaxShift],
// clamped outside (where only all-zero blocks fall).
TEST(E2m1ToE4m3, BlockShiftIsTheClampedExponentDifference) {
  for (int row_exp : {-20, -1, 0, 5, 100})
    for (int byte = 0; byte < 256; ++byte) {
      const int d = byte - 127 - row_exp;
      const int want = d < cuda::kMinShift ? cuda::kMinShift : d > cuda::kMaxShift ? cuda::kMaxShift : d;
      EXPECT_EQ(cuda::block_shift(byte, row_exp), want)
          << "byte " << byte << " row exponent " << row_exp;
    }
  EXPECT_EQ(cuda::block_shift(127 + 3 - 2, 3), -2);
  EXPECT_EQ(cuda::block_shift(0, 0), cuda::kMinShift);
  EXPECT_EQ(cuda::block_shift(255, 0), cuda::kMaxShift);
}

TEST(E2m1ToE4m3, EveryCodePairInEveryPositionUnderEveryShift) {
  for (int d = cuda::kMinShift; d <= cuda::kMaxShift; ++d) {
    const uint2 t = cuda::e4m3_shift_table(d);
    for (int pos = 0; pos < 4; ++pos)      // which byte of the word holds the pair
      for (int pair = 0; pair < 256; ++pair) {
        // The other bytes hold a fixed pattern of other codes, so a byte landing in the wrong
        // place or a sign from a neighbour shows.
        uint32_t w = 0x9E3B5A71u;
        w = (w & ~(0xFFu << (8 * pos))) | (static_cast<uint32_t>(pair) << (8 * pos));
        const uint2 out = cuda::e2m1x8_to_e4m3(w, t);
        for (int i = 0; i < 8; ++i) {
          const int code = static_cast<int>((w >> (4 * i)) & 0xF);
          ASSERT_EQ(byte_of(i < 4 ? out.x : out.y, i % 4), expected_byte(code, d))
              << "shift " << d << " word " << std::hex << w << " weight " << std::dec << i;
        }
      }
  }
}

TEST(E2m1ToE4m3, BlockBytesInWeightOrder) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int d = cuda::kMinShift + static_cast<int>(rng() % (cuda::kMaxShift - cuda::kMinShift + 1));
    const uint4 codes = make_uint4(rng(), rng(), rng(), rng());
    uint4 lo, hi;
    cuda::e2m1_block_to_e4m3(codes, cuda::e4m3_shift_table(d), lo, hi);
    const uint32_t in[4] = {codes.x, codes.y, codes.z, codes.w};
    const uint32_t out[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    for (int k = 0; k < 32; ++k) {  // weight k: nibble k % 8 of code word k / 8, low nibble first
      const int code = static_cast<int>((in[k / 8] >> (4 * (k % 8))) & 0xF);
      ASSERT_EQ(byte_of(out[k / 4], k % 4), expected_byte(code, d)) << "trial " << trial << " weight " << k;
    }
  }
}

// The register form's conversion of four codes: every 16-bit pattern under every shift.
TEST(E2m1ToE4m3, FourCodesUnderEveryShift) {
  for (int d = cuda::kMinShift; d <= cuda::kMaxShift; ++d) {
    const uint2 t = cuda::e4m3_shift_table(d);
    for (uint32_t w = 0; w < 0x10000u; ++w) {
      const uint32_t out = cuda::e2m1x4_to_e4m3(w | 0xA5C30000u, t);  // bits above 16 are ignored
      for (int i = 0; i < 4; ++i)
        ASSERT_EQ(byte_of(out, i), expected_byte(static_cast<int>((w >> (4 * i)) & 0xF), d))
            << "shift " << d << " codes " << std::hex << w << " weight " << std::dec << i;
    }
  }
}

// The register-source kernel's gather (rs_fragment.h): a code tile written as TMA's 64-byte
// swizzle lays it out (bits 4–5 of each byte offset XOR bits 7–8), read back chunk by chunk the
// kernel's way, gives every thread of a warp group, in every register of every MX block of the
// step, the four codes that wgmma's A layout puts there (row 16 warp + lane / 4 + 8 (j % 2),
// k 4 (lane % 4) + 16 (j / 2) … + 3 of the block); and the 64 rows × 128 weights are each
// covered once.
TEST(RsFragment, GatherFromTheSwizzledTileIsWgmmasLayout) {
  std::mt19937 rng(5);
  constexpr int kRows = 128, kRowBytes = cuda::rs::kRowBytes;
  std::vector<uint8_t> tile(kRows * kRowBytes), swizzled(tile.size());
  for (auto& b : tile) b = static_cast<uint8_t>(rng());
  for (int off = 0; off < kRows * kRowBytes; ++off) swizzled[off ^ (((off >> 7) & 3) << 4)] = tile[off];
  const auto code_at = [&](int row, int k) {  // weight k of the step in row `row`, low nibble first
    return (tile[row * kRowBytes + k / 2] >> (4 * (k % 2))) & 0xF;
  };
  for (int group = 0; group < 2; ++group) {
    std::vector<int> covered(64 * 128, 0);
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int s = 0; s < 4; ++s)
          for (int j = 0; j < 4; ++j) {
            const int row = 64 * group + cuda::rs::a_row(warp, lane, j);
            uint4 chunk;
            std::memcpy(&chunk, swizzled.data() + cuda::rs::code_chunk_offset(row, s), sizeof chunk);
            const uint32_t codes = cuda::rs::a_codes(chunk, lane, j);
            ASSERT_EQ(codes >> 16, 0u);
            for (int b = 0; b < 4; ++b) {
              const int k = 32 * s + cuda::rs::a_k(lane, j) + b;
              ASSERT_EQ(static_cast<int>((codes >> (4 * b)) & 0xF), code_at(row, k))
                  << "group " << group << " warp " << warp << " lane " << lane << " block " << s << " register " << j;
              ++covered[(row - 64 * group) * 128 + k];
            }
          }
    for (int i = 0; i < 64 * 128; ++i) ASSERT_EQ(covered[i], 1) << "row " << i / 128 << " weight " << i % 128;
  }
}

}  // namespace
}  // namespace stave
