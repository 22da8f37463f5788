// The single-thread leaf kernels of the fast CPU backend (every op but the linear layer, which
// is cpu_linear.h's). One body (op_kernels_body.h) is compiled three times: baseline x86-64
// (op_kernels_generic.cpp), AVX2+FMA (avx2/) and AVX-512 (avx512/); op_kernels() picks the
// table of the active ISA level. The callers in cpu_backend.cpp own threads and scratch memory,
// so the ISA-specific objects contain no OpenMP regions and no standard-library templates (a template
// instantiated under AVX-512 flags could be the copy the linker keeps for every caller).
//
// Numerics: fp32 throughout with a fast exp (Cephes-style polynomial, ≤ 2 ulp over the range
// used); each kernel's oracle is the ref:: op named in cpu_backend.h, compared in
// tests/test_cpu_backend_ops.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/gated_delta_net.h"

namespace stave::cpu {

enum class Isa;  // cpu_features.h (declared here only: this header is compiled under ISA flags)

// One block of attention rows that share a key/value head: row r reads its query at q_rows[r],
// attends keys [0, n_keys[r]) (each key j at k + j·kv_stride, value at v + j·kv_stride, head_dim
// floats) and writes softmax(q·kᵀ·scale)·v to out_rows[r].
struct AttentionRows {
  int64_t rows = 0;
  const float* const* q_rows = nullptr;
  float* const* out_rows = nullptr;
  const int64_t* n_keys = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t kv_stride = 0;
  // Optional: the keys already transposed, tile t's [head_dim, kAttentionTile] block at
  // k_tiles + t·head_dim·kAttentionTile (attention_key_tile's layout), shared by every row
  // block of the head; null: attention_rows transposes each tile itself.
  const float* k_tiles = nullptr;
  int64_t head_dim = 0;
  float scale = 1.0f;
};

inline constexpr int64_t kAttentionTile = 64;  // keys per tile of the online softmax

// Scratch floats attention_rows needs for `rows` rows of head_dim d.
inline size_t attention_scratch_floats(int64_t rows, int64_t d) {
  return static_cast<size_t>(rows * kAttentionTile + 2 * rows * d + 2 * rows + d * kAttentionTile);
}
// Scratch floats gated_delta_head needs (chunk-sized, independent of the token count).
inline size_t gated_delta_scratch_floats(const GatedDeltaDims& d, int64_t chunk) {
  return static_cast<size_t>(chunk * (4 * d.d_k + d.d_v + 2 * chunk + 2));
}

struct OpKernels {
  const char* isa;
  // y = x / sqrt(mean(x²) + eps) · (w + w_offset) per row (y may alias x).
  void (*rms_norm_rows)(const float* x, int64_t rows, int64_t dim, const float* w, float w_offset, float eps,
                        float* y);
  // y = w ⊙ x / sqrt(mean(x²) + eps) · silu(z) per row.
  void (*gated_rms_norm_rows)(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps,
                              float* y);
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* y);
  void (*sigmoid_mul)(float* x, const float* gate, int64_t n);
  // Tokens [t0, t1) of ref::causal_conv1d_silu with the weight transposed to wt[kernel, channels];
  // history is read only (the caller updates it).
  void (*conv1d_silu_tokens)(const float* x, int64_t t0, int64_t t1, int64_t channels, const float* wt,
                             int64_t kernel, const float* history, float* y);
  // ref::apply_rope on `tokens` rows.
  void (*rope)(float* x, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* cos,
               const float* sin);
  // v head h of ref::gated_delta_rule_chunked / _recurrent; state_h [d_k, d_v] updated in place.
  void (*gated_delta_head)(const GatedDeltaDims& dims, const GatedDeltaInput& in, int64_t h, int64_t chunk,
                           float* state_h, float* out, float* scratch);
  void (*gated_delta_recurrent_head)(const GatedDeltaDims& dims, const GatedDeltaInput& in, int64_t h,
                                     float* state_h, float* out, float* scratch);
  // Tiled online-softmax attention of one row block (scratch: attention_scratch_floats).
  void (*attention_rows)(const AttentionRows& a, float* scratch);
  // Keys [0, n) (n ≤ kAttentionTile) of one tile transposed to kt[d, kAttentionTile], zero past n.
  void (*attention_key_tile)(const float* k, int64_t kv_stride, int64_t n, int64_t d, float* kt);
  // x ← GELU(x), tanh form / erf form (vision MLP).
  void (*gelu_tanh)(float* x, int64_t n);
};

// The table for active_isa() (cpu_features.h, the one ISA query): AMX has no leaf kernels of its
// own, so kAmx uses the AVX-512 table. Follows force_isa() and STAVE_CPU_ISA like cpu::linear.
const OpKernels& op_kernels();
const OpKernels& op_kernels_for(Isa isa);

// The tables, one per ISA (op_kernels_for chooses).
const OpKernels& op_kernels_generic();
const OpKernels& op_kernels_avx2();
const OpKernels& op_kernels_avx512();

}  // namespace stave::cpu
