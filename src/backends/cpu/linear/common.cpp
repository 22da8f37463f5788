#include <algorithm>
#include <atomic>

#include "backends/cpu/linear/kernels.h"

namespace stave::cpu::kern {

void QuantizedActivations::resize(int64_t m, int64_t kk, int64_t row_multiple) {
  rows = m;
  k = kk;
  blocks = kk / mxfp4::kBlock;
  padded_rows = (m + row_multiple - 1) / row_multiple * row_multiple;
  codes.assign(static_cast<size_t>(padded_rows * k), 0);
  scales.assign(static_cast<size_t>(padded_rows * blocks), 0.0f);
  offsets.assign(static_cast<size_t>(padded_rows * blocks), 0);
}

namespace {
std::atomic<uint64_t> g_amx_bf16_calls{0};
std::atomic<uint64_t> g_w4a4_bf16_calls{0};
std::atomic<uint64_t> g_bf16_split_calls{0};
std::atomic<uint64_t> g_bf16_gemv_calls{0};
std::atomic<uint64_t> g_w4a4_gemv_calls{0};
}  // namespace

void count_amx_bf16_call() { g_amx_bf16_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t amx_bf16_calls() { return g_amx_bf16_calls.load(std::memory_order_relaxed); }
void count_w4a4_bf16_call() { g_w4a4_bf16_calls.fetch_add(1, std::memory_order_relaxed); }
void count_bf16_split_call() { g_bf16_split_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t bf16_split_calls() { return g_bf16_split_calls.load(std::memory_order_relaxed); }
void count_bf16_gemv_call() { g_bf16_gemv_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t bf16_gemv_calls() { return g_bf16_gemv_calls.load(std::memory_order_relaxed); }
void count_w4a4_gemv_call() { g_w4a4_gemv_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t w4a4_gemv_calls() { return g_w4a4_gemv_calls.load(std::memory_order_relaxed); }
uint64_t w4a4_bf16_calls() { return g_w4a4_bf16_calls.load(std::memory_order_relaxed); }

const float* e8m0_table() {
  static const auto table = [] {
    static float t[256];
    for (int b = 0; b < 256; ++b) t[b] = mxfp4::exp2_int(b - 127);
    return t;
  }();
  return table;
}

}  // namespace stave::cpu::kern
