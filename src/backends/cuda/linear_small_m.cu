// Small-M MXFP4 W4A4 linear layers (decode steps) that read the packed weight directly
// (linear_small_m.h). First run on a GPU (an H100) on 2026-12-05: CudaLinearSmallM.* passed and
// bench_linear's cuda_decode_* cases set the default bound kSmallMDefaultMax.
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/cuda/linear_small_m.h"
#include "backends/cuda/mxfp4_device.cuh"
#include "stave/errors.h"

namespace stave::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block, each on R output rows
std::atomic<int64_t> g_calls{0};

// The E2M1 values of codes i and i + 4 of a packed word u = word >> 4i (bits 0..3 and 16..19),
// times 2^−14, exactly: the 3 magnitude bits placed at binary16's exponent/mantissa boundary
// (bits 9..11) read as 2^(e − 15)·(1 + m/2) for e ≥ 1 and m·2^−15 for e = 0 (a binary16
// subnormal), i.e. the E2M1 value · 2^−14 in both cases; the sign to bit 15. Two codes per
// 32-bit word, then one conversion per value (binary16 → fp32 is exact, subnormals included).
__device__ __forceinline__ float2 e2m1_pair(uint32_t u) {
  const uint32_t h = ((u & 0x00070007u) << 9) | ((u & 0x00080008u) << 12);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// The activations' layout for the product: lane l of a warp reads chunk c = 32·i + l (32 values)
// as 8 float4s, so the float4s are stored lane-innermost: float4 q of chunk c of row m at
// m·Cp·8 + (i·8 + q)·32 + l (Cp = chunks rounded up to 32), and each warp-wide load is 512
// contiguous bytes (row-major rows would put the lanes' 16 bytes 128 bytes apart, 32 L1 lines
// per load). Chunks C … Cp − 1 are never written nor read.
__host__ __device__ inline int64_t padded_chunks(int64_t chunks) { return (chunks + 31) / 32 * 32; }

// The MXFP4 QDQ of x [M, K] (K % 32 == 0) into that layout: qdq_kernel of linear_ops.cu, the
// same device functions (mxfp4_device.cuh) and roundings, bit for bit; one warp per block.
// Rows M … rows − 1 (the kernel's MB rounding) are written as zeros (the QDQ of 0 is +0), so the
// product needs no per-row branch.
__global__ void qdq_lanes_kernel(const float* __restrict__ x, int64_t M, int64_t rows, int64_t K, int mode,
                                 float* __restrict__ out) {
  const int64_t chunks = K / 32, cp = padded_chunks(chunks);
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= rows * chunks) return;  // whole warps
  const int64_t m = warp / chunks, c = warp % chunks;
  const float v = m < M ? x[m * K + c * 32 + lane] : 0.0f;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, amax, o);
    amax = amax < other ? other : amax;
  }
  const int e = scale_exponent(amax, mode);
  const float inv = ldexpf(1.0f, -e), sc = ldexpf(1.0f, e);
  const float q = e2m1_round(__fmul_rn(v, inv));
  out[m * cp * 32 + (((c >> 5) * 8 + lane / 4) * 32 + (c & 31)) * 4 + lane % 4] = __fmul_rn(q, sc);
}

// 2^(e − 127) as the reference's ldexpf gives it (e = 0: 2^−127, e = 255: +inf).
__device__ __forceinline__ float e8m0_scale(uint32_t e) { return e == 0 ? 0x1p-127f : __uint_as_float(e << 23); }

// One warp per R output rows, lane l on 16-byte chunks l, l + 32, … of each row (a chunk = 32
// codes = one scale block). Per chunk: the 32 weights decoded in registers, the partial sums
// Σ w·x over the block for each of the M activation rows in fp32 (products exact unless an
// activation is below ~2^−110, where a product would underflow), times the
// block scale (a power of two: exact), added to the lane's accumulators; a shuffle reduction
// over the warp at the end. xq: the MXFP4-QDQ'd activations in the lane layout above (fp32,
// L1/L2 resident).
template <int MB, int R>
__global__ void __launch_bounds__(kWarps * 32) small_m_kernel(const uint8_t* __restrict__ codes,
                                                              const uint8_t* __restrict__ scales,
                                                              const float* __restrict__ xq, const float* __restrict__ bias,
                                                              int M, int64_t N, int64_t K, float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * R;
  if (row0 >= N) return;  // whole warps only: no shuffle below misses a lane
  const int64_t chunks = K / 32, row_bytes = K / 2;
  const int x_row4 = static_cast<int>(padded_chunks(chunks) * 8);  // float4s per activation row (< 2^31: K < 2^31)
  const uint4* wrow[R];
  const uint8_t* srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r < N ? row0 + r : row0;  // a missing last row re-reads row0, not written
    wrow[r] = reinterpret_cast<const uint4*>(codes + row * row_bytes);
    srow[r] = scales + row * chunks;
  }
  float acc[R][MB];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MB; ++m) acc[r][m] = 0.0f;

  uint4 next[R];
  uint32_t next_s[R];
  if (lane < chunks)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      next[r] = __ldg(wrow[r] + lane);
      next_s[r] = __ldg(srow[r] + lane);
    }
  for (int64_t c = lane; c < chunks; c += 32) {
    uint4 q[R];
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      q[r] = next[r];
      s[r] = e8m0_scale(next_s[r]);
    }
    if (c + 32 < chunks)  // the next chunk's loads in flight while this one is multiplied
#pragma unroll
      for (int r = 0; r < R; ++r) {
        next[r] = __ldg(wrow[r] + c + 32);
        next_s[r] = __ldg(srow[r] + c + 32);
      }
    // This lane's float4s of chunk c in activation row 0 (the lane layout above).
    const float4* xc = reinterpret_cast<const float4*>(xq) + (c >> 5) * 256 + lane;
    float part[R][MB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MB; ++m) part[r][m] = 0.0f;
    // Word j of the chunk holds codes 8j … 8j + 7 (code k is byte k / 2's low nibble for even k,
    // high for odd, as the reference unpacks them: nibble k % 8 of the word); e2m1_pair pairs
    // code 8j + i with 8j + i + 4, matching the activation float4s at 8j and 8j + 4.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 w[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t word = j == 0 ? q[r].x : j == 1 ? q[r].y : j == 2 ? q[r].z : q[r].w;
#pragma unroll
        for (int i = 0; i < 4; ++i) w[r][i] = e2m1_pair(word >> (4 * i));
      }
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        const float4* xp = xc + (m * x_row4 + 64 * j);
        const float4 lo = __ldg(xp), hi = __ldg(xp + 32);  // float4s 2j and 2j + 1 of chunk c
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float p = part[r][m];
          p = fmaf(w[r][0].x, lo.x, p);
          p = fmaf(w[r][1].x, lo.y, p);
          p = fmaf(w[r][2].x, lo.z, p);
          p = fmaf(w[r][3].x, lo.w, p);
          p = fmaf(w[r][0].y, hi.x, p);
          p = fmaf(w[r][1].y, hi.y, p);
          p = fmaf(w[r][2].y, hi.z, p);
          p = fmaf(w[r][3].y, hi.w, p);
          part[r][m] = p;
        }
      }
    }
    // part holds Σ w·x · 2^−14 (w the E2M1 values): times 2^14, then the block scale (both
    // powers of two: exact barring overflow, in the order that cannot overflow early).
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MB; ++m) acc[r][m] = fmaf(part[r][m] * 0x1p14f, s[r], acc[r][m]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      const int64_t row = row0 + r;
      if (lane == m % 32 && m < M && row < N) y[m * N + row] = bias ? v + bias[row] : v;
    }
}

template <int MB, int R>
void launch(const DeviceLinear& w, const float* xq, const float* bias, int M, float* y, cudaStream_t s) {
  const int64_t rows_per_block = int64_t{kWarps} * R;
  const unsigned blocks = static_cast<unsigned>((w.out + rows_per_block - 1) / rows_per_block);
  small_m_kernel<MB, R><<<blocks, kWarps * 32, 0, s>>>(w.data.as<uint8_t>(), w.scales.as<uint8_t>(), xq, bias, M,
                                                       w.out, w.in, y);
  STAVE_CUDA_LAUNCHED();
}

// Two rows per warp halve the activation loads (L1) per weight byte, which bound the kernel from
// M ≈ 4 on (linear_small_m.h); one row where two would leave fewer than two blocks per SM's worth
// of work (H200: 132 SMs), and at MB = 16. ptxas -v (sm_90a, nvcc 13.0; it hoists the chunk's
// activation loads, hence the counts), registers for MB = 1, 2, 4, 8, 16: one row 40, 64, 73,
// 140, 156; two rows 58, 80, 102, 144 (255 with a spill at MB = 16, not used).
template <int MB>
void launch_rows(const DeviceLinear& w, const float* xq, const float* bias, int M, float* y, cudaStream_t s) {
  if (MB <= 8 && w.out >= int64_t{2} * 132 * kWarps * 2)
    launch<MB, 2>(w, xq, bias, M, y, s);
  else
    launch<MB, 1>(w, xq, bias, M, y, s);
}

int mode_code(mxfp4::ScaleMode m) {
  return m == mxfp4::ScaleMode::kEven ? 0 : (m == mxfp4::ScaleMode::kFloor ? 1 : 2);
}

}  // namespace

SmallMPath small_m_path_from_env() {
  const char* e = std::getenv("STAVE_CUDA_SMALL_M");
  if (!e || !*e) return SmallMPath::kDefault;
  if (std::string_view(e) == "off") return SmallMPath::kOff;
  if (std::string_view(e) == "mxfp4") return SmallMPath::kMxfp4;
  throw Error(ErrorKind::kUnsupported,
              std::string("STAVE_CUDA_SMALL_M is '") + e + "': expected 'mxfp4' or 'off' (or unset)");
}

int64_t linear_small_m_calls() { return g_calls.load(); }

namespace dev {

bool linear_small_m_supports(const GpuContext& ctx, const DeviceLinear& w, int64_t M) {
  return !ctx.exact() && w.format == WeightFormat::kMXFP4 && w.quantize_input && w.in % 32 == 0 && M >= 1 &&
         M <= kSmallMMax;
}

bool linear_small_m_applies(const GpuContext& ctx, const DeviceLinear& w, int64_t M) {
  const SmallMPath path = small_m_path_from_env();
  if (path == SmallMPath::kOff || (path == SmallMPath::kDefault && M > kSmallMDefaultMax)) return false;
  return linear_small_m_supports(ctx, w, M);
}

void linear_small_m(GpuContext& ctx, const DeviceLinear& w, const float* x, int64_t M, float* y) {
  if (!linear_small_m_supports(ctx, w, M))
    throw Error(ErrorKind::kInternal, w.name + ": small-M MXFP4 linear called for a weight or M (" +
                                          std::to_string(M) + ") it does not support");
  const int64_t K = w.in, chunks = K / 32;
  const int64_t rows = M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : M <= 8 ? 8 : 16;  // the kernel's MB
  cudaStream_t s = ctx.stream();
  ctx.scratch_x().reserve(static_cast<size_t>(rows * padded_chunks(chunks) * 32) * sizeof(float));
  float* xq = ctx.scratch_x().as<float>();
  const int64_t threads = rows * chunks * 32;  // bit-exact with mxfp4::qdq_row
  qdq_lanes_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, s>>>(
      x, M, rows, K, mode_code(w.input_scale_mode), xq);
  STAVE_CUDA_LAUNCHED();
  const float* bias = w.bias.bytes() ? w.bias.as<float>() : nullptr;
  const int m = static_cast<int>(M);
  if (m <= 1)
    launch_rows<1>(w, xq, bias, m, y, s);
  else if (m <= 2)
    launch_rows<2>(w, xq, bias, m, y, s);
  else if (m <= 4)
    launch_rows<4>(w, xq, bias, m, y, s);
  else if (m <= 8)
    launch_rows<8>(w, xq, bias, m, y, s);
  else
    launch_rows<16>(w, xq, bias, m, y, s);
  ++g_calls;
}

}  // namespace dev
}  // namespace stave::cuda
