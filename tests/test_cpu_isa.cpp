// The one ISA query (backends/cpu/cpu_features.h): STAVE_CPU_ISA and force_isa() select one level,
// and both kernel families follow it — the linear kernels (cpu_linear.cpp switches on
// active_isa()) and the leaf op tables (op_kernels()). A level the CPU lacks is clamped with a
// message, never silently; an unknown value is an error. The expected tables are written out
// here, not derived from the dispatch code.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/op_kernels.h"
#include "stave/errors.h"

namespace stave {
namespace {

using cpu::Isa;

constexpr Isa kLevels[] = {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512, Isa::kAmx};

// The leaf-kernel table each level must use (AMX has no leaf kernels of its own).
const char* table_for(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAmx: return "avx512";
  }
  return "?";
}

TEST(CpuIsa, EnvSelectsTheLowerOfAskedAndSupported) {
  for (Isa detected : kLevels) {
    EXPECT_EQ(cpu::isa_from_env(nullptr, detected).isa, detected);
    EXPECT_EQ(cpu::isa_from_env("", detected).isa, detected);
    EXPECT_TRUE(cpu::isa_from_env(nullptr, detected).message.empty());
    for (Isa asked : kLevels) {
      const cpu::IsaChoice c = cpu::isa_from_env(cpu::isa_name(asked), detected);
      const std::string what = std::string("asked ") + cpu::isa_name(asked) + " on " + cpu::isa_name(detected);
      if (asked <= detected) {
        EXPECT_EQ(c.isa, asked) << what;
        EXPECT_TRUE(c.message.empty()) << what << ": " << c.message;
      } else {  // not silent: the message names what was asked and what is used
        EXPECT_EQ(c.isa, detected) << what;
        EXPECT_NE(c.message.find(std::string("STAVE_CPU_ISA=") + cpu::isa_name(asked)), std::string::npos) << c.message;
        EXPECT_NE(c.message.find(std::string("use ") + cpu::isa_name(detected)), std::string::npos) << c.message;
      }
    }
  }
}

TEST(CpuIsa, EnvRefusesUnknownLevels) {
  try {
    cpu::isa_from_env("avx1024", Isa::kAvx2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'avx1024'"), std::string::npos) << e.what();
  }
}

TEST(CpuIsa, LeafKernelsFollowTheForcedLevel) {
  for (Isa forced : kLevels) {
    cpu::ScopedIsa scope(forced);
    const Isa used = forced <= cpu::detected_isa() ? forced : cpu::detected_isa();
    EXPECT_EQ(cpu::active_isa(), used) << "forced " << cpu::isa_name(forced);
    EXPECT_STREQ(cpu::op_kernels().isa, table_for(used)) << "forced " << cpu::isa_name(forced);
  }
}

// Run by CTest with STAVE_CPU_ISA set to each level (tests/CMakeLists.txt, cpu_isa.env_*): the
// process's level and its leaf table are what the variable asks, capped by the CPU.
TEST(CpuIsa, ProcessFollowsTheEnvironment) {
  const char* env = std::getenv("STAVE_CPU_ISA");
  const Isa asked = env && *env ? cpu::parse_isa(env) : Isa::kAmx;
  const Isa used = asked <= cpu::detected_isa() ? asked : cpu::detected_isa();
  EXPECT_EQ(cpu::active_isa(), used) << "STAVE_CPU_ISA=" << (env ? env : "(unset)");
  EXPECT_STREQ(cpu::op_kernels().isa, table_for(used));
  std::printf("[ CPU ISA  ] STAVE_CPU_ISA=%s detected %s active %s leaf table %s\n", env ? env : "(unset)",
              cpu::isa_name(cpu::detected_isa()), cpu::isa_name(cpu::active_isa()), cpu::op_kernels().isa);
}

}  // namespace
}  // namespace stave
