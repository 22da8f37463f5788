#include "engine/device_backbone.h"

#include "stave/errors.h"

#ifdef STAVE_WITH_CUDA
#include "backends/cuda/cuda_backbone.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_ops.h"
#endif

namespace stave {

std::shared_ptr<DeviceBackbone> make_device_backbone(const Release& release, const EngineOptions& options) {
  if (options.device.empty() || options.device == "cpu") return nullptr;
  if (options.device != "cuda")
    throw Error(ErrorKind::kUnsupported, "device must be cpu or cuda, not \"" + options.device + "\"");
#ifdef STAVE_WITH_CUDA
  if (!cuda::device_available())
    throw Error(ErrorKind::kUnsupported, "device cuda: no CUDA GPU is visible to this process");
  auto gpu = std::make_shared<cuda::CudaBackbone>(release, options.precision);
  return std::make_shared<DeviceBackbone>(
      [gpu](std::span<const BackboneSequence> seqs) { return gpu->forward_lent(seqs); });
#else
  (void)release;
  throw Error(ErrorKind::kUnsupported, "device cuda: this stave was built without CUDA (configure with -DSTAVE_CUDA=ON)");
#endif
}

std::unique_ptr<Backend> make_device_head_backend(const EngineOptions& options) {
  if (options.device != "cuda" || options.precision == Precision::kExact) return nullptr;
#ifdef STAVE_WITH_CUDA
  cuda::CudaBackendOptions o;
  o.keep_matmul_weights = true;  // the head's weights live as long as the engine
  return std::make_unique<cuda::CudaBackend>(options.precision, o);
#else
  return nullptr;  // make_device_backbone has already refused "cuda"
#endif
}

}  // namespace stave
