// Shared by the GPU tests of the MXFP4 linear paths (test_cuda_linear_fp8.cpp,
// test_cuda_linear_small_m.cpp): a random MXFP4 W4A4 weight, one product through dev::linear,
// and the op suite's error norm.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/device_ops.h"
#include "cuda_test_util.h"
#include "formats/linear_weight.h"

namespace stave::test {

struct Mxfp4Weight {
  std::vector<uint8_t> codes, scales;
  std::vector<float> bias;
  LinearWeight w;
};

// Random codes; scale bytes uniform in [lo, hi]; `name` is the weight's name.
inline Mxfp4Weight make_mxfp4(std::mt19937& rng, int64_t out, int64_t in, int lo, int hi, bool bias,
                              const std::string& name) {
  Mxfp4Weight h;
  h.codes.resize(static_cast<size_t>(out * in / 2));
  h.scales.resize(static_cast<size_t>(out * in / 32));
  for (auto& b : h.codes) b = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> e(lo, hi);
  for (auto& s : h.scales) s = static_cast<uint8_t>(e(rng));
  h.w.name = name;
  h.w.out = out;
  h.w.in = in;
  h.w.format = WeightFormat::kMXFP4;
  h.w.quantize_input = true;
  h.w.data = h.codes.data();
  h.w.scales = h.scales.data();
  if (bias) {
    h.bias = random_floats(rng, static_cast<size_t>(out));
    h.w.bias = h.bias.data();
  }
  return h;
}

// max |Δ| / max(1, max |want|), as the op suite measures.
inline double scaled_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1.0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  return max_abs_diff(got, want) / scale;
}

// y [M, d.out] = dev::linear of x [M, d.in] on the GPU (the output poisoned with NaN first).
inline std::vector<float> run_linear(cuda::GpuContext& ctx, const cuda::DeviceLinear& d, const std::vector<float>& x,
                                     int64_t M) {
  cuda::DeviceBuffer dx, dy(static_cast<size_t>(M * d.out) * sizeof(float));
  dx.upload(x.data(), x.size() * sizeof(float));
  std::vector<float> y(static_cast<size_t>(M * d.out), NAN);
  STAVE_CUDA_CHECK(cudaMemset(dy.as<void>(), 0xff, dy.bytes()));  // NaN poison
  STAVE_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::dev::linear(ctx, d, dx.as<float>(), M, dy.as<float>());
  ctx.synchronize();
  dy.download(y.data(), y.size() * sizeof(float));
  return y;
}

}  // namespace stave::test
