// The AMX-BF16 tile unit behind the tile drivers (linear/bf16_tile_gemm.h for BF16 weights,
// linear/w4a4_tile_gemm.h for MXFP4 W4A4): constructed once per OpenMP thread, it configures
// the tiles (palette 1) and releases them when destroyed. Include only from files compiled with
// the amx flags, and run only where active_isa() is kAmx.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace stave::cpu::kern {
namespace {

struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

// Tiles 0..3 = C (16 rows × 16 fp32), 4,5 = A (16 rows × 32 bf16), 6,7 = B (16 column pairs ×
// 16 columns × 2 bf16), all 16 rows × 64 bytes; dp() = C[2i + j] += A_i · B_j.
struct AmxBf16Tiles {
  AmxBf16Tiles() {
    AmxTileConfig cfg;
    cfg.palette_id = 1;
    for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
  }
  ~AmxBf16Tiles() { _tile_release(); }
  AmxBf16Tiles(const AmxBf16Tiles&) = delete;
  AmxBf16Tiles& operator=(const AmxBf16Tiles&) = delete;

  void zero_c() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  void load_c(const float* c) {
    _tile_loadd(0, c, 64);
    _tile_loadd(1, c + 256, 64);
    _tile_loadd(2, c + 512, 64);
    _tile_loadd(3, c + 768, 64);
  }
  void store_c(float* c) {
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 256, 64);
    _tile_stored(2, c + 512, 64);
    _tile_stored(3, c + 768, 64);
  }
  void load_a(const uint16_t* a, int64_t stride) {
    _tile_loadd(4, a, stride);
    _tile_loadd(5, reinterpret_cast<const char*>(a) + 16 * stride, stride);
  }
  void load_b(const uint16_t* b) {
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + 512, 64);
  }
  void dp() {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
};

}  // namespace
}  // namespace stave::cpu::kern
