// Entry points of the CPU linear kernels, one set per instruction-set level (the files in
// ../avx2, ../avx512 and ../amx are compiled with that ISA's flags; generic.cpp with none).
// cpu_linear.cpp picks one at run time from active_isa(); tests call the quantizers directly.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "formats/linear_weight.h"
#include "formats/mxfp4.h"

namespace stave::cpu::kern {

// A row-major activation quantized to MXFP4 for the W4A4 product, in the form the integer
// kernels consume. codes are 2·E2M1 (exact integers in [-12, 12]) in natural column order, so
// a 32-block dot with the weight's 2·E2M1 codes is an exact int32 (|Σ| ≤ 32·144 = 4608).
struct QuantizedActivations {
  int64_t rows = 0, k = 0, blocks = 0;  // blocks = k / 32
  int64_t padded_rows = 0;              // rows rounded up (AMX tiles read 32 rows at a time)
  std::vector<int8_t> codes;            // [padded_rows][k]; padding rows are zero
  // [padded_rows][blocks]: 2^(e - 2) with e the block's scale exponent. The −2 undoes the two
  // factors of 2 in (2·E2M1_x)(2·E2M1_w), so a block contributes Σ codes·codes · scale · 2^e_w.
  std::vector<float> scales;
  // [padded_rows][blocks]: 12 · Σ codes of the block. The AVX2/VNNI kernels multiply unsigned
  // weight codes (2·E2M1 + 12 ∈ [0, 24]) by signed activation codes, so they subtract this.
  std::vector<int32_t> offsets;

  void resize(int64_t m, int64_t kk, int64_t row_multiple);
};

// Quantize M rows of K values (K a multiple of 32) exactly as mxfp4::quantize_block does.
void quantize_activations_generic(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                                  int64_t row_multiple, QuantizedActivations& q);
void quantize_activations_avx2(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                               int64_t row_multiple, QuantizedActivations& q);
void quantize_activations_avx512(const float* x, int64_t M, int64_t K, mxfp4::ScaleMode mode,
                                 int64_t row_multiple, QuantizedActivations& q);

// A row-major fp32 activation split into two BF16 matrices for the AMX-BF16 product
// (linear_amx_bf16): hi = bf16_rn(x), lo = bf16_rn(x − hi), so hi + lo carries ~16 significant
// bits (|x − hi − lo| ≤ 2^-16·|x|). Special values: a finite x whose bf16 rounding would overflow
// takes hi = x truncated to bf16 (so hi + lo stays finite); x = ±inf gives hi = ±inf, lo = 0;
// NaN gives hi = NaN, lo = 0. vcvtneps2bf16 treats fp32 denormals as zero, so a denormal x (or
// residual) becomes 0 — as tdpbf16ps would do with a denormal bf16 anyway.
// Layout (the B operand of tdpbf16ps, one 4 KiB block per 32 rows × 32 columns):
//   block(mb, ks) + part·1024 + half·512 + (kk/2)·32 + mm·2 + kk%2
// for row r = 32·mb + 16·half + mm, column k = 32·ks + kk, part 0 = hi, 1 = lo. Each 512-element
// quarter is one B tile: 16 rows (column pairs) × 16 activation rows × 2 bf16. Rows ≥ `rows`
// and columns ≥ `k` are zero.
struct SplitActivations {
  static constexpr int64_t kBlock = 2048;  // bf16 per (32-row block, 32-column step)
  int64_t rows = 0, k = 0;
  int64_t padded_rows = 0;  // rows rounded up to 32
  int64_t ksteps = 0;       // ceil(k / 32)
  std::unique_ptr<uint16_t[]> data;  // [padded_rows / 32][ksteps][kBlock]
  const uint16_t* block(int64_t mb, int64_t ks) const { return data.get() + (mb * ksteps + ks) * kBlock; }
};

// Split M rows of K values (any K ≥ 1) into s (AVX-512 F + BF16; usable at level avx512).
void split_activations_bf16_avx512(const float* x, int64_t M, int64_t K, SplitActivations& s);

// y[M, out] = x · Wᵀ (+ bias) for every weight format. M ≥ 1, shapes already checked.
void linear_generic(const LinearWeight& w, const float* x, int64_t M, float* y);
void linear_avx2(const LinearWeight& w, const float* x, int64_t M, float* y);
void linear_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// Handles what AMX is worth using for (W4A4 and BF16 weights with M ≥ 16) and returns true;
// false otherwise (the caller then uses the AVX-512 kernel).
bool linear_amx(const LinearWeight& w, const float* x, int64_t M, float* y);
// The AMX-BF16 part of linear_amx: BF16 weights with M ≥ 16 (any K, any N), the activation split
// into hi + lo (SplitActivations) and both multiplied with tdpbf16ps into fp32 tiles. Returns
// false (and does nothing) for any other weight format or M < 16. Only call it where
// active_isa() is kAmx (it executes AMX instructions).
bool linear_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y);
// How many products linear_amx_bf16 has computed in this process (tests assert that a call
// reached it; one relaxed atomic increment per call). Defined in common.cpp (baseline flags),
// so reading it is safe on any CPU.
uint64_t amx_bf16_calls();
void count_amx_bf16_call();

// MXFP4 W4A4 in fast precision on AVX-512-BF16 (avx512/linear_dpbf16_avx512.cpp): the
// activation QDQ'd once and kept as bf16, weight strips expanded from MXFP4 to bf16 in the
// kernel, exact products accumulated in fp32 across all K with vdpbf16ps. Returns false (and
// does nothing) unless w is MXFP4 with quantize_input. Only call it at level avx512 or above.
bool linear_w4a4_bf16_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// Not dispatched since the register-blocked VNNI kernel below (linear_w4a4_vnni_avx512) beat it
// on the 2-core EPYC (bench_linear, 9B MLP shapes, M = 16..512: 1.35–1.8×, docs/benchmarks.md);
// kept for benchmarks and for CPUs where vdpbf16ps outruns vpdpbusd. Before, linear_avx512 ran
// it from 32 rows (where it beat the int8 kernel below).
// The VNNI int8 W4A4 kernel (exact integer 32-block dots, stored and rescaled per block):
// linear_avx512 runs it for kGemvMaxRows < M < kW4A4VnniMinRows. Level avx512 or above.
void linear_w4a4_int8_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// BF16 weights in fast precision on AVX-512-BF16 (same file and blocking): the activation split
// into bf16 hi + lo (SplitActivations, as linear_amx_bf16) and both multiplied by the stored
// weight with vdpbf16ps into one fp32 chain of 2·K exact products per output — the numerics of
// linear_amx_bf16. Returns false unless w is BF16. Level avx512 or above.
bool linear_bf16_split_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// Not dispatched: on the 2-core EPYC (bench_linear bf16 vs bf16_split, 9B MLP shapes, loaded
// machine) it was 0.94–1.2× the fp32-FMA kernel from run to run — two vdpbf16ps per 32 products
// have the same peak as one FMA per 16, so only blocking can win. Kept for benchmarks and for
// CPUs where vdpbf16ps outruns FMA; tests hold it to the AMX-BF16 bound.
uint64_t bf16_split_calls();
void count_bf16_split_call();
// Calls of linear_w4a4_bf16_avx512 in this process (tests assert the dispatch; baseline flags).
uint64_t w4a4_bf16_calls();
void count_w4a4_bf16_call();
// MXFP4 W4A4 in fast precision on AVX-512 VNNI, register-blocked for prefill
// (avx512/linear_w4a4_vnni_avx512.cpp): the activation quantized once per call and rearranged so
// a vector lane is an activation row, weight strips expanded from MXFP4 to u8 codes in the
// kernel, 8 vpdpbusd per 32-block into an int32 accumulator that is converted and added to fp32
// times the two block scales (no store per block). Numerics of the other int8 W4A4 kernels
// (exact block dots, K/32 fp32 terms). Returns false (and does nothing) unless w is MXFP4 with
// quantize_input and M ≥ 1. Level avx512 or above.
bool linear_w4a4_vnni_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
// Rows from which linear_avx512 runs W4A4 on it (bench_linear, 9B MLP up, 1 thread on the
// 2-core EPYC: 110 GFLOP/s at M = 16 against 51 for the int8 kernel and 77 for the bf16 one).
inline constexpr int64_t kW4A4VnniMinRows = 16;
// Calls of linear_w4a4_vnni_avx512 in this process (tests assert the dispatch; baseline flags).
uint64_t w4a4_vnni_calls();
void count_w4a4_vnni_call();

// MXFP4 W4A4 in fast precision on AVX2, register-blocked for prefill
// (avx2/linear_w4a4_maddubs_avx2.cpp): the AVX2 analogue of linear_w4a4_vnni_avx512 (lanes =
// 8 activation rows, weight strips expanded to u8 codes in the kernel), 8 vpmaddubsw + vpaddw
// per 32-block into int16 pairs, one vpmaddwd by ones to the exact int32 dot, converted and
// added to fp32 times the two block scales. Numerics of the other int8 W4A4 kernels. Returns
// false (and does nothing) unless w is MXFP4 with quantize_input and M ≥ 1. Level avx2 or above.
bool linear_w4a4_maddubs_avx2(const LinearWeight& w, const float* x, int64_t M, float* y);
// Rows from which linear_avx2 runs W4A4 on it (below, linear_w4a4_tile_avx2). bench_linear,
// 9B MLP shapes, 1 thread, level avx2 on the 2-core Zen 4: at 6 rows 8.3–10.2 ms against
// 10.3–12.2 for the tile kernel, at 8 rows 8.4–10.2 against 12.6–15.3; at 4 rows it loses
// (8.3–10.3 against 7.2–9.7): below one 8-row group the weight expansion dominates.
inline constexpr int64_t kW4A4MaddubsMinRows = 6;
// The AVX2 W4A4 kernel linear_avx2 runs below kW4A4MaddubsMinRows (w4a4_gemm.h's tile: one
// vpmaddubsw 32-block dot per row and column, rescaled per 8-lane partial), at any M (for
// bench_linear's before/after rows). Level avx2 or above.
void linear_w4a4_tile_avx2(const LinearWeight& w, const float* x, int64_t M, float* y);
// Calls of linear_w4a4_maddubs_avx2 in this process (tests assert the dispatch; baseline flags).
uint64_t w4a4_maddubs_calls();
void count_w4a4_maddubs_call();

// ---- MXFP4 W4A4 on AMX-BF16 (amx/linear_w4a4_amx_bf16.cpp; driver linear/w4a4_tile_gemm.h) ----
// The activation QDQ'd to MXFP4 once per call and kept as bf16 (exact), weight panels expanded
// from MXFP4 to bf16 B tiles in the kernel, tdpbf16ps into fp32 tiles across all of K: the
// numerics of linear_w4a4_bf16_avx512 (one fp32 chain of K exact products per output).
// Returns false (and does nothing) unless w is MXFP4 with quantize_input and M ≥ 1. Only call
// it where active_isa() is kAmx (it executes AMX instructions).
bool linear_w4a4_amx_bf16(const LinearWeight& w, const float* x, int64_t M, float* y);
// Rows from which linear_amx runs W4A4 on the AMX tile unit (fast precision only: exact precision
// never reaches the CPU kernels). Below, linear_avx512 (its int8 kernel, or VNNI from
// kW4A4VnniMinRows). Measured on the 16-core AMX host (tools/device/cpu_host_linear.sh,
// 2026-12-05, 9B MLP up, all threads): VNNI 0.68 / 1.07 / 1.65 ms at 16 / 32 / 64 rows against
// 1.09 / 1.17 / 1.55 for AMX-BF16 (and 1.97 / 1.98 / 2.57 for AMX-INT8): the tile unit pays its
// weight expansion back from about 64 rows.
inline constexpr int64_t kW4A4AmxBf16MinRows = 64;
// Whether linear_amx takes W4A4 to linear_w4a4_amx_bf16 (the default, or STAVE_CPU_W4A4_AMX=bf16)
// or to the AMX-INT8 kernel (STAVE_CPU_W4A4_AMX=int8). AMX-BF16 is the default since its op tests
// passed on AMX hardware (2026-12-05) and it was the fastest W4A4 kernel there at every 9B / 27B
// MLP shape from 64 rows (1.04–1.7× AMX-INT8 at 512 / 2048 rows). Read on each call (tests
// switch it); any other value than "bf16" or "int8" is an error naming the variable.
bool w4a4_amx_bf16_enabled();
// Calls of linear_w4a4_amx_bf16 in this process (tests assert the dispatch; baseline flags).
uint64_t w4a4_amx_bf16_calls();
void count_w4a4_amx_bf16_call();
// The AMX-INT8 W4A4 kernel (tdpbssd per 32-block, stored and rescaled per block): what
// linear_amx runs for W4A4 with STAVE_CPU_W4A4_AMX=int8 (the default before AMX-BF16). Returns
// false unless w is W4A4 and M ≥ 16. Level amx only.
bool linear_w4a4_int8_amx(const LinearWeight& w, const float* x, int64_t M, float* y);

// The two operand expansions of the AMX-BF16 W4A4 kernel (avx512/mxfp4_bf16_expand_avx512.cpp,
// usable at level avx512 and above, so the driver also runs with emulated tiles in the tests):
//  - the quantized activation as bf16 B tiles (the VNNI layout, as SplitActivations without the
//    lo part): the E2M1 · 2^e of row r = 32·mb + 16·half + mm, column c = 32·ks + kk is
//    out[(mb·(k / 32) + ks)·1024 + half·512 + (kk / 2)·32 + mm·2 + kk % 2], for all
//    q.padded_rows rows (padding rows zero): one contiguous 2 KiB block = two B tiles per 32
//    rows × 32 columns, so a K chunk of one 32-row block is contiguous;
//  - one A tile of weight: the 32-block kb of weight rows n0 .. n0 + 15 (rows ≥ out_features as
//    zeros) as row-major bf16, out[l·32 + c] = row n0 + l, column 32·kb + c (64-byte rows).
void activations_to_bf16_avx512(const QuantizedActivations& q, uint16_t* out);
void expand_mxfp4_bf16_rows_avx512(const LinearWeight& w, int64_t n0, int64_t kb, uint16_t* out);

// Decode-shaped products (bf16_gemv.h): BF16 weights with M ≤ kGemvMaxRows go to a kernel that
// streams each weight row once from its stored bf16 (threads split N), at levels avx2 and
// avx512 (amx uses the avx512 one below its own M ≥ 16 threshold). Calls are counted so tests
// can assert the dispatch (baseline flags, safe on any CPU).
inline constexpr int64_t kGemvMaxRows = 8;
uint64_t bf16_gemv_calls();
void count_bf16_gemv_call();
// MXFP4 W4A4 with M ≤ kGemvMaxRows on AVX-512 VNNI (avx512/linear_w4a4_gemv_avx512.cpp): the
// activation rearranged to the packed nibble order, four blocks per weight load, threads split
// N. linear_avx512 dispatches it below kGemvMaxRows + 1 rows. Level avx512 or above.
void linear_w4a4_gemv_avx512(const LinearWeight& w, const float* x, int64_t M, float* y);
uint64_t w4a4_gemv_calls();
void count_w4a4_gemv_call();
// At M = 1 both decode kernels read one weight row at a time (one sequential stream per thread)
// when the activation row, as the kernel reads it, fits in this many bytes (so it stays in L1
// while the weight streams past); wider rows take the multi-row tile, which reuses each
// activation load over several weight rows. Counted like the calls above.
inline constexpr int64_t kGemvSingleRowMaxActivationBytes = 20 << 10;
uint64_t gemv_single_row_calls();
void count_gemv_single_row_call();

// 2^(b − 127) for an E8M0 byte b (byte 255, NaN in the format, gives +inf like exp2_int(128)).
const float* e8m0_table();

}  // namespace stave::cpu::kern
