#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cpu/linear/kernels.h"
#include "stave/errors.h"

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
std::atomic<uint64_t> g_w4a4_amx_bf16_calls{0};
std::atomic<uint64_t> g_bf16_gemv_calls{0};
std::atomic<uint64_t> g_w4a4_gemv_calls{0};
std::atomic<uint64_t> g_w4a4_vnni_calls{0};
std::atomic<uint64_t> g_w4a4_maddubs_calls{0};
std::atomic<uint64_t> g_gemv_single_row_calls{0};
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
void count_w4a4_vnni_call() { g_w4a4_vnni_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t w4a4_vnni_calls() { return g_w4a4_vnni_calls.load(std::memory_order_relaxed); }
void count_w4a4_maddubs_call() { g_w4a4_maddubs_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t w4a4_maddubs_calls() { return g_w4a4_maddubs_calls.load(std::memory_order_relaxed); }
void count_gemv_single_row_call() { g_gemv_single_row_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t gemv_single_row_calls() { return g_gemv_single_row_calls.load(std::memory_order_relaxed); }
uint64_t w4a4_bf16_calls() { return g_w4a4_bf16_calls.load(std::memory_order_relaxed); }
void count_w4a4_amx_bf16_call() { g_w4a4_amx_bf16_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t w4a4_amx_bf16_calls() { return g_w4a4_amx_bf16_calls.load(std::memory_order_relaxed); }

bool w4a4_amx_bf16_enabled() {
  const char* v = std::getenv("STAVE_CPU_W4A4_AMX");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "bf16") return true;
  if (std::string_view(v) == "int8") return false;
  throw Error(ErrorKind::kInvalidRequest,
              std::string("STAVE_CPU_W4A4_AMX must be bf16 or int8 (the AMX kernel for MXFP4 W4A4), not '") + v + "'");
}

const float* e8m0_table() {
  static const auto table = [] {
    static float t[256];
    for (int b = 0; b < 256; ++b) t[b] = mxfp4::exp2_int(b - 127);
    return t;
  }();
  return table;
}

}  // namespace stave::cpu::kern
