// cuBLASLt FP8 E4M3 GEMMs at the 27B's linear shapes, every algorithm cuBLASLt's heuristic offers
// (up to STAVE_BENCH_ALGOS, default 8) under each of five settings: how far the library's own
// kernels go for our products, and which setting and algorithm the FP8 path should take.
//   outer_f32      scales per row of both operands in the GEMM (OUTER_VEC_32F), fp32 out: today
//   outer_f32_fast the same with CUBLASLT_MATMUL_DESC_FAST_ACCUM
//   scalar_f32     one scale per operand (the most common FP8 GEMM), fp32 out
//   scalar_bf16    the same with BF16 out (half the output bytes)
//   scalar_bf16_fast
// Operands are random E4M3 bytes; time per product (CUDA events), TFLOP/s as a counter, and the
// fraction of the card's dense FP8 rate (STAVE_BENCH_FP8_TFLOPS, default 989.5 · 2 for an H100 /
// H200 SXM) as `of_peak`. Names: fp8_gemm/<shape>/M/<setting>/algo<i>.
//   bench_cuda_fp8_gemm --benchmark_filter='/2048/' --benchmark_min_time=0.05s
// STAVE_BENCH_SEARCH=M[,M…] (e.g. 512,2048): instead of the benchmarks, search the outer_f32
// setting's configurations around the one algorithm cuBLASLt's heuristic offers (tile × stages,
// cluster shape, custom option, CTA swizzle, split-K; see search_shape), each configuration that
// cublasLtMatmulAlgoCheck accepts timed (median of 5 products), at most STAVE_BENCH_SEARCH_SECONDS
// (default 20) per shape and row count; it prints the heuristic's choice and the five fastest
// (STAVE_BENCH_SHAPES=name[,name…] narrows the shapes; STAVE_BENCH_SEARCH_STEPS=step[,step…] the
// steps, of tiles, cluster, custom, swizzle, splitk).
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/device_ops.h"

namespace {

using stave::cuda::DeviceBuffer;

struct Shape {
  const char* name;
  int64_t n, k;
};
// The 27B's products (N outputs, K inputs).
constexpr Shape kShapes[] = {{"mlp_up", 17408, 5120},   {"mlp_down", 5120, 17408}, {"gdn_qkv", 10240, 5120},
                             {"gdn_z", 6144, 5120},     {"gdn_out", 5120, 6144},   {"attn_q", 12288, 5120},
                             {"attn_kv", 1024, 5120}};

struct Setting {
  const char* name;
  bool outer, bf16_out, fast;
};
constexpr Setting kSettings[] = {{"outer_f32", true, false, false},
                                 {"outer_f32_fast", true, false, true},
                                 {"scalar_f32", false, false, false},
                                 {"scalar_bf16", false, true, false},
                                 {"scalar_bf16_fast", false, true, true}};

constexpr size_t kWorkspace = size_t{32} << 20;

struct Device {
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer workspace, a, b, d;
  DeviceBuffer row_scales, scalar;  // 0.5 per row, and one 0.5
};

Device& device() {
  static Device g = [] {
    Device d;
    STAVE_CUBLAS_CHECK(cublasLtCreate(&d.lt));
    STAVE_CUDA_CHECK(cudaStreamCreate(&d.stream));
    d.workspace.resize(kWorkspace);
    int64_t max_a = 0, max_b = 0, max_d = 0, max_rows = 0;
    for (const Shape& s : kShapes) {
      max_a = std::max(max_a, s.n * s.k);
      max_b = std::max(max_b, int64_t{8192} * s.k);
      max_d = std::max(max_d, int64_t{8192} * s.n);
      max_rows = std::max(max_rows, std::max(s.n, int64_t{8192}));
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(std::max(max_a, max_b)));
    std::mt19937 rng(7);
    // E4M3 of magnitude ≤ 1.75 (exponent field ≤ 7) with random signs: finite sums.
    for (auto& v : bytes) v = static_cast<uint8_t>((rng() & 0x80u) | (rng() % 0x40u));
    d.a.upload(bytes.data(), static_cast<size_t>(max_a));
    d.b.upload(bytes.data(), static_cast<size_t>(max_b));
    d.d.resize(static_cast<size_t>(max_d) * sizeof(float));
    const std::vector<float> scales(static_cast<size_t>(max_rows), 0.5f);
    d.row_scales.upload(scales.data(), scales.size() * sizeof(float));
    d.scalar.upload(scales.data(), sizeof(float));
    return d;
  }();
  return g;
}

// One product's descriptors (column-major as the product: D (N × M) = Wᵀ(K × N) · x (K × M)).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
};

Plan make_plan(const Shape& s, int64_t M, const Setting& set, int want) {
  Device& g = device();
  Plan p;
  STAVE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (set.fast) {
    const int8_t fast = 1;
    STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  }
  const float* sa = (set.outer ? g.row_scales : g.scalar).as<float>();
  const float* sb = sa;
  if (set.outer) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)) !=
            CUBLAS_STATUS_SUCCESS)
      return p;  // no algorithms
  }
  STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
  STAVE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
  STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, s.k, s.n, s.k));
  STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, s.k, M, s.k));
  STAVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, set.bf16_out ? CUDA_R_16BF : CUDA_R_32F, s.n, M, s.n));
  cublasLtMatmulPreference_t pref = nullptr;
  STAVE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspace;
  STAVE_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  p.algos.resize(static_cast<size_t>(want));
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(g.lt, p.desc, p.a, p.b, p.d, p.d, pref, want, p.algos.data(), &found) !=
      CUBLAS_STATUS_SUCCESS)
    found = 0;
  p.algos.resize(static_cast<size_t>(found));
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

void run_product(const Plan& p, int index) {
  Device& g = device();
  const float one = 1.0f, zero = 0.0f;
  STAVE_CUBLAS_CHECK(cublasLtMatmul(g.lt, p.desc, &one, g.a.as<void>(), p.a, g.b.as<void>(), p.b, &zero,
                                    g.d.as<void>(), p.d, g.d.as<void>(), p.d, &p.algos[static_cast<size_t>(index)].algo,
                                    g.workspace.as<void>(), kWorkspace, g.stream));
}

void bench_product(benchmark::State& state, std::shared_ptr<Plan> plan, int index, double flop) {
  Device& g = device();
  cudaEvent_t t0, t1;
  STAVE_CUDA_CHECK(cudaEventCreate(&t0));
  STAVE_CUDA_CHECK(cudaEventCreate(&t1));
  for (int i = 0; i < 3; ++i) run_product(*plan, index);
  for (auto _ : state) {
    STAVE_CUDA_CHECK(cudaEventRecord(t0, g.stream));
    run_product(*plan, index);
    STAVE_CUDA_CHECK(cudaEventRecord(t1, g.stream));
    STAVE_CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    STAVE_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    state.SetIterationTime(ms * 1e-3);
  }
  const char* peak_env = std::getenv("STAVE_BENCH_FP8_TFLOPS");
  const double peak = peak_env ? std::atof(peak_env) : 1979.0;
  state.counters["TFLOPs"] = benchmark::Counter(flop * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_peak"] =
      benchmark::Counter(flop * 1e-12 / peak, benchmark::Counter::kIsIterationInvariantRate);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
}

// The search (STAVE_BENCH_SEARCH): a configuration is the algorithm's configuration attributes.
struct Config {
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  uint16_t cluster = 0;
};

std::string describe(const Config& c) {
  return "id " + std::to_string(c.id) + " tile " + std::to_string(c.tile) + " stages " + std::to_string(c.stages) +
         " cluster " + std::to_string(c.cluster) + " splitk " + std::to_string(c.splitk) + " red " +
         std::to_string(c.reduction) + " swz " + std::to_string(c.swizzle) + " opt " + std::to_string(c.custom);
}

Config config_of(const cublasLtMatmulAlgo_t& algo) {
  Config c;
  size_t n = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &c.id, sizeof(c.id), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof(c.tile), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof(c.stages), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c.cluster, sizeof(c.cluster), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk, sizeof(c.splitk), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction,
                                       sizeof(c.reduction), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle, sizeof(c.swizzle), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom, sizeof(c.custom), &n);
  return c;
}

// Sets c's attributes on algo (a copy of the heuristic's); false if one is refused.
bool apply(cublasLtMatmulAlgo_t& algo, const Config& c) {
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof(c.tile)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof(c.stages)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c.cluster,
                                              sizeof(c.cluster)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk, sizeof(c.splitk)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction,
                                              sizeof(c.reduction)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle,
                                              sizeof(c.swizzle)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom,
                                              sizeof(c.custom)) == CUBLAS_STATUS_SUCCESS;
}

// Median ms of 5 products with `algo` (after 1 untimed), or a negative value if it fails to run.
double time_algo(const Plan& p, const cublasLtMatmulAlgo_t& algo) {
  Device& g = device();
  const float one = 1.0f, zero = 0.0f;
  const auto run = [&] {
    return cublasLtMatmul(g.lt, p.desc, &one, g.a.as<void>(), p.a, g.b.as<void>(), p.b, &zero, g.d.as<void>(), p.d,
                          g.d.as<void>(), p.d, &algo, g.workspace.as<void>(), kWorkspace, g.stream);
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return -1;
  cudaEvent_t t0, t1;
  STAVE_CUDA_CHECK(cudaEventCreate(&t0));
  STAVE_CUDA_CHECK(cudaEventCreate(&t1));
  std::vector<float> ms(5);
  for (float& m : ms) {
    STAVE_CUDA_CHECK(cudaEventRecord(t0, g.stream));
    run();
    STAVE_CUDA_CHECK(cudaEventRecord(t1, g.stream));
    STAVE_CUDA_CHECK(cudaEventSynchronize(t1));
    STAVE_CUDA_CHECK(cudaEventElapsedTime(&m, t0, t1));
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

template <class T>
std::vector<T> cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {};
  std::vector<T> v(bytes / sizeof(T));
  cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), v.size() * sizeof(T), &bytes);
  return v;
}

template <class T>
T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t n = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &n);
  return v;
}

// Coordinate search from the heuristic's configuration: tile × stages together, then the cluster
// shape, the custom option, the CTA swizzle and split-K (with each reduction scheme offered), each
// step keeping the fastest so far; every configuration cublasLtMatmulAlgoCheck accepts is timed.
void search_shape(const Shape& s, int64_t M) {
  Device& g = device();
  const Plan p = make_plan(s, M, kSettings[0], 1);
  const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(s.n) * static_cast<double>(s.k);
  const auto tflops = [&](double ms) { return flop / (ms * 1e-3) * 1e-12; };
  if (p.algos.empty()) {
    std::printf("%s/%lld: the heuristic offers no algorithm\n", s.name, static_cast<long long>(M));
    return;
  }
  const cublasLtMatmulAlgo_t base = p.algos[0].algo;
  const Config start = config_of(base);
  const double base_ms = time_algo(p, base);
  std::printf("%s/%lld heuristic: %.4f ms (%.0f TFLOP/s) %s\n", s.name, static_cast<long long>(M), base_ms,
              tflops(base_ms), describe(start).c_str());
  const char* seconds_env = std::getenv("STAVE_BENCH_SEARCH_SECONDS");
  const int seconds = seconds_env ? std::max(1, std::atoi(seconds_env)) : 20;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool stopped = false;
  int timed = 0;
  std::vector<std::pair<double, Config>> found{{base_ms, start}};
  Config best = start;
  double best_ms = base_ms;
  const auto consider = [&](const Config& c) {
    if (stopped || std::chrono::steady_clock::now() > deadline) {
      stopped = true;
      return;
    }
    cublasLtMatmulAlgo_t algo = base;
    cublasLtMatmulHeuristicResult_t r{};
    if (!apply(algo, c) || cublasLtMatmulAlgoCheck(g.lt, p.desc, p.a, p.b, p.d, p.d, &algo, &r) != CUBLAS_STATUS_SUCCESS ||
        r.workspaceSize > kWorkspace)
      return;
    ++timed;
    const double ms = time_algo(p, algo);
    if (ms <= 0) return;
    found.emplace_back(ms, c);
    if (ms < best_ms) best_ms = ms, best = c;
  };
  const char* steps_env = std::getenv("STAVE_BENCH_SEARCH_STEPS");
  const std::string steps = std::string(",") + (steps_env ? steps_env : "tiles,cluster,custom,swizzle,splitk") + ",";
  const auto step = [&](const char* name) { return steps.find(std::string(",") + name + ",") != std::string::npos; };
  std::vector<uint32_t> tiles = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_TILE_IDS);
  std::vector<uint32_t> stages = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
  if (tiles.empty()) tiles.push_back(start.tile);
  if (stages.empty()) stages.push_back(start.stages);
  const Config from_tiles = best;
  for (const uint32_t t : step("tiles") ? tiles : std::vector<uint32_t>{})
    for (const uint32_t st : stages) {
      Config c = from_tiles;
      c.tile = t, c.stages = st;
      if (t != start.tile || st != start.stages) consider(c);
    }
  const Config from_cluster = best;
  for (const uint16_t cl : {0, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
    if (!step("cluster")) break;
    Config c = from_cluster;
    c.cluster = cl;
    if (cl != from_cluster.cluster) consider(c);
  }
  const Config from_custom = best;
  const int32_t custom_max = cap_value<int32_t>(base, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
  for (int32_t o = 0; o <= std::min(custom_max, 15); ++o) {
    if (!step("custom")) break;
    Config c = from_custom;
    c.custom = static_cast<uint32_t>(o);
    if (c.custom != from_custom.custom) consider(c);
  }
  const Config from_swizzle = best;
  if (step("swizzle") && cap_value<uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT)) {
    Config c = from_swizzle;
    c.swizzle = 1 - c.swizzle;
    consider(c);
  }
  const Config from_split = best;
  if (step("splitk") && cap_value<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT)) {
    const uint32_t mask = cap_value<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    for (int32_t k = 2; k <= 4; ++k)
      for (const uint32_t red : {1u, 2u, 4u})
        if (mask & red) {
          Config c = from_split;
          c.splitk = k, c.reduction = red;
          consider(c);
        }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::printf("%s/%lld: %zu tiles × %zu stages, custom options 0–%d; %d configurations timed%s; best %.4f ms "
              "(%.0f TFLOP/s, %.3f× the heuristic's)\n",
              s.name, static_cast<long long>(M), tiles.size(), stages.size(), custom_max, timed,
              stopped ? " (stopped at the time limit)" : "", best_ms, tflops(best_ms), base_ms / best_ms);
  for (size_t i = 0; i < std::min<size_t>(found.size() <= 12 ? found.size() : 5, found.size()); ++i)
    std::printf("  %.4f ms (%.0f TFLOP/s) %s\n", found[i].first, tflops(found[i].first),
                describe(found[i].second).c_str());
  std::fflush(stdout);
}

int search(const char* rows, const char* shapes) {
  std::vector<int64_t> ms;
  for (const char* c = rows; *c;) {
    char* end = nullptr;
    const long long v = std::strtoll(c, &end, 10);
    if (end == c || v <= 0) {
      std::fprintf(stderr, "STAVE_BENCH_SEARCH: expected row counts like 512,2048, got '%s'\n", rows);
      return 2;
    }
    ms.push_back(v);
    c = *end == ',' ? end + 1 : end;
  }
  const std::string want = shapes ? std::string(",") + shapes + "," : "";
  for (const int64_t M : ms)
    for (const Shape& s : kShapes)
      if (want.empty() || want.find(std::string(",") + s.name + ",") != std::string::npos) search_shape(s, M);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!stave::cuda::device_available()) {
    std::printf("bench_cuda_fp8_gemm: no CUDA device, nothing to time\n");
    return 0;
  }
  if (const char* rows = std::getenv("STAVE_BENCH_SEARCH")) return search(rows, std::getenv("STAVE_BENCH_SHAPES"));
  const char* want_env = std::getenv("STAVE_BENCH_ALGOS");
  const int want = want_env ? std::max(1, std::atoi(want_env)) : 8;
  for (const int64_t M : {512, 2048, 8192})
    for (const Shape& s : kShapes)
      for (const Setting& set : kSettings) {
        auto plan = std::make_shared<Plan>(make_plan(s, M, set, want));
        const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(s.n) * static_cast<double>(s.k);
        for (int i = 0; i < static_cast<int>(plan->algos.size()); ++i) {
          const std::string name = std::string("fp8_gemm/") + s.name + "/" + std::to_string(M) + "/" + set.name +
                                   "/algo" + std::to_string(i);
          benchmark::RegisterBenchmark(name.c_str(), bench_product, plan, i, flop)
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
