// The tests' name for util/scoped_env.h (each CTest test runs in its own process, so nothing
// leaks between tests).
#pragma once
#include "util/scoped_env.h"

namespace stave::test {
using ScopedEnv = ::stave::ScopedEnv;
}  // namespace stave::test
