// F.linear's summation order on the reference machine (MKL sgemm) against what the reference
// recorded: random products of three shapes with 1..16 rows (tools/reference/probe_small_linear.py,
// tests/data/torch_linear_probe.*), and the map of which kernel MKL picks for which shape
// (tools/reference/probe_linear_paths.py, tests/data/torch_linear_paths.txt).
#include <bit>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/linear_weight.h"
#include "ops/reference.h"
#include "ops/torch_linear_order.h"
#include "test_util.h"

namespace stave {
namespace {

namespace to = ref::torch_order;
const std::string kData = std::string(STAVE_SOURCE_DIR) + "/tests/data/";

TEST(TorchLinearOrder, RefLinearMatchesRecordedProductsBitForBit) {
  const std::vector<float> D = test::read_floats(kData + "torch_linear_probe.bin");
  std::ifstream jf(kData + "torch_linear_probe.json");
  ASSERT_TRUE(jf && !D.empty()) << "tests/data/torch_linear_probe.{bin,json} missing";
  const auto J = nlohmann::json::parse(jf);
  int few_rows_probes = 0;
  for (const auto& p : J["probes"]) {
    const int64_t M = p["M"], N = p["N"], K = p["K"];
    const float* x = &D[p["x"].get<size_t>()];
    const float* want = &D[p["y"].get<size_t>()];
    LinearWeight w;
    w.format = WeightFormat::kF32;
    w.out = N;
    w.in = K;
    const float* wd = &D[p["w"].get<size_t>()];
    w.data = wd;
    w.bias = &D[p["b"].get<size_t>()];
    std::vector<float> y(static_cast<size_t>(M * N));
    ref::linear(w, x, M, y.data());
    int64_t differ = 0;
    for (int64_t i = 0; i < M * N; ++i) differ += std::bit_cast<uint32_t>(y[i]) != std::bit_cast<uint32_t>(want[i]);
    // M = 1 is sgemv (another order, not reproduced); every other row count must be exact.
    if (M >= 2) {
      EXPECT_EQ(differ, 0) << "M=" << M << " N=" << N << " K=" << K;
    }
    few_rows_probes += to::linear_uses_few_rows(M, N, K);
    // The two orders really differ on this data: the test tells them apart.
    if (M >= 2 && M <= 5) {
      int64_t chain_differs = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          chain_differs += to::gemm_dot(x + m * K, 1, wd + n * K, 1, K) + w.bias[n] != want[m * N + n];
      EXPECT_GT(chain_differs, M * N / 4) << "M=" << M << " N=" << N << " K=" << K;
    }
  }
  EXPECT_EQ(few_rows_probes, 4 + 4 + 9);  // M = 2..5, 2..5 and 2..10 of the three shapes
}

TEST(TorchLinearOrder, KernelChoiceFollowsTheRecordedMap) {
  std::ifstream f(kData + "torch_linear_paths.txt");
  ASSERT_TRUE(f) << "tests/data/torch_linear_paths.txt missing";
  std::string line;
  int cells = 0, few = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    int64_t K = 0, N = 0;
    std::string paths;
    in >> K >> N >> paths;
    ASSERT_EQ(paths.size(), 23u) << line;
    for (int64_t M = 2; M <= 24; ++M) {
      const char seen = paths[static_cast<size_t>(M - 2)];
      const bool ours = to::linear_uses_few_rows(M, N, K);
      ++cells;
      if (seen == 'f') {
        ++few;
        EXPECT_TRUE(ours) << "K=" << K << " N=" << N << " M=" << M << " is MKL's few-rows kernel";
      } else {
        EXPECT_FALSE(ours) << "K=" << K << " N=" << N << " M=" << M << " is not MKL's few-rows kernel";
      }
    }
  }
  EXPECT_EQ(cells, 210 * 23);
  EXPECT_GT(few, 1000);
}

}  // namespace
}  // namespace stave
