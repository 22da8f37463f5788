#include "backends/cpu/flush_denormals.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "stave/errors.h"

namespace stave::cpu {

bool flush_denormals_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("STAVE_CPU_DENORMALS");
    if (v == nullptr || *v == '\0' || std::string_view(v) == "flush") return true;
    if (std::string_view(v) == "keep") return false;
    throw Error(ErrorKind::kInvalidRequest,
                std::string("STAVE_CPU_DENORMALS must be flush or keep (fast CPU ops and fp32 denormals), not '") + v +
                    "'");
  }();
  return enabled;
}

}  // namespace stave::cpu
