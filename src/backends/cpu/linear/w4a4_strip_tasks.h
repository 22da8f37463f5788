// The task plan and the output write of the register-blocked W4A4 prefill kernels
// (avx512/linear_w4a4_vnni_avx512.cpp, avx2/linear_w4a4_maddubs_avx2.cpp): both cut the output
// into strips of ns columns × runs of activation groups (lanes rows each) and accumulate a task in
// a column-major buffer acc[column][row] before writing it to y with the bias. Anonymous
// namespace: each kernel's file compiles its own copy with its ISA flags.
#pragma once
#include <algorithm>
#include <cstdint>

#include "formats/linear_weight.h"

namespace stave::cpu::kern {
namespace {

// Tasks = strips × runs; a run is at most `groups_per_task` groups (a multiple of r). Runs are
// split only when there are too few strips to give every thread about four tasks, or a run would
// pass max_groups.
struct StripPlan {
  int64_t strips = 0, groups_per_task = 0, tasks = 0;
};

inline StripPlan strip_plan(int64_t N, int64_t groups, int64_t ns, int64_t r, int64_t max_groups, int64_t threads) {
  StripPlan p;
  p.strips = (N + ns - 1) / ns;
  const int64_t splits = std::clamp<int64_t>((4 * threads + p.strips - 1) / p.strips, 1, groups);
  const int64_t gpt = (groups + splits - 1) / splits;
  p.groups_per_task = std::min(max_groups, (gpt + r - 1) / r * r);
  p.tasks = p.strips * ((groups + p.groups_per_task - 1) / p.groups_per_task);
  return p;
}

// y rows m0 .. m1 − 1, columns n0 .. n0 + cols − 1 = acc[c · ld + (m − m0)] + bias.
inline void write_strip(const float* acc, int64_t ld, const LinearWeight& w, int64_t m0, int64_t m1, int64_t n0,
                        int64_t cols, float* y) {
  const int64_t N = w.out;
  for (int64_t m = m0; m < m1; ++m) {
    float* yr = y + m * N + n0;
    for (int64_t c = 0; c < cols; ++c) yr[c] = acc[c * ld + (m - m0)] + (w.bias ? w.bias[n0 + c] : 0.0f);
  }
}

}  // namespace
}  // namespace stave::cpu::kern
