#include "backends/registry.h"

#include <cstdlib>

#include "backends/cpu/cpu_backend.h"
#include "backends/staged_backend.h"
#include "stave/errors.h"

#ifdef STAVE_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_ops.h"
#endif

namespace stave {

const Backend& cpu_backend(Precision precision) {
  return precision == Precision::kExact ? reference_backend() : cpu::fast_backend();
}

std::vector<std::string> backend_devices() {
#ifdef STAVE_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::string backend_unavailable_reason(std::string_view device) {
  if (device.empty() || device == "cpu") return {};
  if (device != "cuda") return "device must be cpu or cuda, not \"" + std::string(device) + "\"";
#ifdef STAVE_WITH_CUDA
  if (!cuda::device_available()) return "device cuda: no CUDA GPU is visible to this process";
  return {};
#else
  return "device cuda: this stave was built without CUDA (configure with -DSTAVE_CUDA=ON)";
#endif
}

std::shared_ptr<const Backend> make_backend(std::string_view device, Precision precision,
                                            const BackendOptions& options) {
  if (const std::string why = backend_unavailable_reason(device); !why.empty())
    throw Error(ErrorKind::kUnsupported, why);
  // STAVE_STAGES (or STAVE_CUDA_STAGES): time every op by stage (backends/staged_backend.h).
  const bool staged = std::getenv("STAVE_STAGES") != nullptr || std::getenv("STAVE_CUDA_STAGES") != nullptr;
  auto wrap = [staged](std::shared_ptr<const Backend> b) -> std::shared_ptr<const Backend> {
    return staged ? std::make_shared<StagedBackend>(std::move(b)) : b;
  };
  if (device.empty() || device == "cpu")
    return wrap(std::shared_ptr<const Backend>(&cpu_backend(precision), [](const Backend*) {}));
#ifdef STAVE_WITH_CUDA
  cuda::CudaBackendOptions o;
  o.keep_matmul_weights = options.keep_matmul_weights;
  if (options.fp8_cache_bytes > 0) {
    o.fp8_weights = cuda::Fp8Weights::kResident;
    o.fp8_cache_bytes = options.fp8_cache_bytes;
  }
  return wrap(std::make_shared<cuda::CudaBackend>(precision, o));
#else
  (void)options;
  throw Error(ErrorKind::kUnsupported, "device cuda: this stave was built without CUDA");
#endif
}

}  // namespace stave
