#include "ops/torch_linear_order.h"

#include <algorithm>

namespace stave::ref::torch_order {

// Where MKL's sgemm takes its few-rows kernel, as tools/reference/probe_linear_paths.py mapped it
// on the reference machine (16 threads; K = 16..1024 in steps of 16, N = 32, 128, 512, M = 2..24;
// tests/data/torch_linear_paths.txt holds the map and tests/test_torch_linear_order.cpp checks this
// function against every cell of it):
//   - every N: M ≤ ⌊K / 24⌋, never above 15;
//   - N = 32: also M·K ≤ 8000, and N = 128: also M·K ≤ 2000 but at least 3 rows (MKL's split of
//     the work over its threads; N = 512 has no such bound) — except where K is a multiple of 256;
//   - K not a multiple of 16 goes another way (neither this kernel nor one chain; not reproduced).
// Other N follow the N = 512 rule: the map agrees across N wherever K ≤ 208, which covers the
// vision mergers of the tiny fixture models; beyond that the cell is a guess, worth ulps only.
int64_t linear_few_rows_limit(int64_t N, int64_t K) {
  if (K % 16 != 0 || K < 48) return 0;
  int64_t limit = std::min<int64_t>(15, K / 24);
  if (K % 256 != 0) {
    if (N == 32) limit = std::min<int64_t>(limit, 8000 / K);
    if (N == 128) limit = std::min<int64_t>(limit, std::max<int64_t>(3, 2000 / K));
  }
  return limit;
}

}  // namespace stave::ref::torch_order
