// The CUDA backend's kernel switches read from the environment that are not the linear path's
// (test_cuda_linear_fp8.cpp has those): each value selects its form, unset selects the default,
// anything else is an error naming the variable and the values it takes. Needs no GPU.
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/expand_ahead.h"
#include "backends/cuda/gated_delta_chunk.h"
#include "backends/cuda/gemm_mxfp4_fp8.h"
#include "backends/cuda/linear_fp8.h"
#include "stave/errors.h"
#include "test_env.h"
#include "test_errors.h"

namespace stave {
namespace {

using test::error_of;

TEST(CudaSwitches, FusedInputIsOnUnlessOff) {
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_INPUT", nullptr);
    EXPECT_TRUE(cuda::fused_input_from_env());
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_INPUT", "on");
    EXPECT_TRUE(cuda::fused_input_from_env());
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_INPUT", "off");
    EXPECT_FALSE(cuda::fused_input_from_env());
  }
  const test::ScopedEnv e("STAVE_CUDA_FUSED_INPUT", "yes");
  const std::string msg = error_of([] { cuda::fused_input_from_env(); });
  EXPECT_NE(msg.find("STAVE_CUDA_FUSED_INPUT is 'yes'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'off'"), std::string::npos) << msg;
}

// The chunk form applies to the Clef shapes' prefill under every value but "recurrent"; decode
// (one token per sequence) and other head sizes keep the recurrence whatever the switch says.
TEST(CudaSwitches, DeltaRuleChoice) {
  const GatedDeltaDims clef{16, 48, 128, 128}, other{16, 48, 64, 64};
  for (const char* v :
       {static_cast<const char*>(nullptr), "auto", "chunk-registers", "chunk-shared", "chunk-split", "chunk-bf16"}) {
    SCOPED_TRACE(v ? v : "(unset)");
    const test::ScopedEnv e("STAVE_CUDA_DELTA", v);
    EXPECT_TRUE(cuda::dev::gated_delta_chunk_applies(clef, 2048, 1));
    EXPECT_FALSE(cuda::dev::gated_delta_chunk_applies(clef, 4, 4));
    EXPECT_FALSE(cuda::dev::gated_delta_chunk_applies(other, 2048, 1));
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_DELTA", "recurrent");
    EXPECT_FALSE(cuda::dev::gated_delta_chunk_applies(clef, 2048, 1));
  }
  const test::ScopedEnv e("STAVE_CUDA_DELTA", "registers");
  const std::string msg = error_of([&] { cuda::dev::gated_delta_chunk_applies(clef, 2048, 1); });
  EXPECT_NE(msg.find("STAVE_CUDA_DELTA is 'registers'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'chunk-shared'"), std::string::npos) << msg;
}

TEST(CudaSwitches, FusedKernelChoice) {
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_KERNEL", nullptr);
    EXPECT_EQ(cuda::dev::fused_kernel_from_env(), cuda::dev::FusedKernel::kSharedMemory);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_KERNEL", "smem");
    EXPECT_EQ(cuda::dev::fused_kernel_from_env(), cuda::dev::FusedKernel::kSharedMemory);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_FUSED_KERNEL", "registers");
    EXPECT_EQ(cuda::dev::fused_kernel_from_env(), cuda::dev::FusedKernel::kRegisters);
  }
  const test::ScopedEnv e("STAVE_CUDA_FUSED_KERNEL", "rs");
  const std::string msg = error_of([] { cuda::dev::fused_kernel_from_env(); });
  EXPECT_NE(msg.find("STAVE_CUDA_FUSED_KERNEL is 'rs'"), std::string::npos) << msg;
}

TEST(CudaSwitches, EmbedRowsChoice) {
  for (const char* v : {static_cast<const char*>(nullptr), "", "rows"}) {
    const test::ScopedEnv e("STAVE_CUDA_EMBED", v);
    EXPECT_EQ(cuda::embed_rows_from_env(), cuda::EmbedRows::kRows);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_EMBED", "device");
    EXPECT_EQ(cuda::embed_rows_from_env(), cuda::EmbedRows::kDevice);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_EMBED", "host");
    EXPECT_EQ(cuda::embed_rows_from_env(), cuda::EmbedRows::kHost);
  }
  const test::ScopedEnv e("STAVE_CUDA_EMBED", "gpu");
  const std::string msg = error_of([] { cuda::embed_rows_from_env(); });
  EXPECT_NE(msg.find("STAVE_CUDA_EMBED is 'gpu'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'device'"), std::string::npos) << msg;
}

TEST(CudaSwitches, ExpandAheadIsOnUnlessOff) {
  for (const char* v : {static_cast<const char*>(nullptr), "", "on"}) {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_AHEAD", v);
    EXPECT_TRUE(cuda::expand_ahead_from_env());
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_AHEAD", "off");
    EXPECT_FALSE(cuda::expand_ahead_from_env());
  }
  const test::ScopedEnv e("STAVE_CUDA_EXPAND_AHEAD", "1");
  EXPECT_EQ(error_of([] { cuda::expand_ahead_from_env(); }), "STAVE_CUDA_EXPAND_AHEAD is '1': expected 'on' or 'off'");
}

TEST(CudaSwitches, GemmSmTarget) {
  {
    const test::ScopedEnv e("STAVE_CUDA_GEMM_SMS", nullptr);
    EXPECT_EQ(cuda::gemm_sm_target_from_env(), 0);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_GEMM_SMS", "120");
    EXPECT_EQ(cuda::gemm_sm_target_from_env(), 120);
  }
  for (const char* v : {"-1", "12x", "2000"}) {
    const test::ScopedEnv e("STAVE_CUDA_GEMM_SMS", v);
    const std::string msg = error_of([] { cuda::gemm_sm_target_from_env(); });
    EXPECT_EQ(msg, std::string("STAVE_CUDA_GEMM_SMS is '") + v + "': expected 0 … 1024");
  }
}

TEST(CudaSwitches, ExpandKernel) {
  {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_KERNEL", nullptr);
    EXPECT_EQ(cuda::expand_kernel_from_env(), cuda::ExpandKernel::kPerm);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_KERNEL", "float");
    EXPECT_EQ(cuda::expand_kernel_from_env(), cuda::ExpandKernel::kFloat);
  }
  const test::ScopedEnv e("STAVE_CUDA_EXPAND_KERNEL", "lut");
  const std::string msg = error_of([] { cuda::expand_kernel_from_env(); });
  EXPECT_NE(msg.find("STAVE_CUDA_EXPAND_KERNEL is 'lut'"), std::string::npos) << msg;
}

TEST(CudaSwitches, ExpandDepth) {
  {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_DEPTH", nullptr);
    EXPECT_EQ(cuda::expand_depth_from_env(), 4);
  }
  {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_DEPTH", "3");
    EXPECT_EQ(cuda::expand_depth_from_env(), 3);
  }
  for (const char* v : {"0", "9", "two"}) {
    const test::ScopedEnv e("STAVE_CUDA_EXPAND_DEPTH", v);
    const std::string msg = error_of([] { cuda::expand_depth_from_env(); });
    EXPECT_EQ(msg, std::string("STAVE_CUDA_EXPAND_DEPTH is '") + v + "': expected 1 … 8");
  }
}

}  // namespace
}  // namespace stave
