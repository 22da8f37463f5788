#include "engine/device_backbone.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "backends/registry.h"
#include "stave/errors.h"

namespace stave {
namespace {

// The head's L-row work runs on the GPU (fast precision on CUDA): the backbone then lends its
// hidden states there.
bool head_on_device(const EngineOptions& options) {
  return options.device == "cuda" && options.precision != Precision::kExact;
}

}  // namespace

BackendOptions device_backend_options(const EngineOptions& options) {
  const double gib = options.fp8_cache_gib;
  if (!std::isfinite(gib) || gib < 0)
    throw Error(ErrorKind::kInvalidRequest,
                fmt::format("fp8_cache_gib must be a size in GiB of at least 0, not {}", gib));
  BackendOptions o;
  if (gib == 0) return o;
  if (options.device.empty() || options.device == "cpu")
    throw Error(ErrorKind::kInvalidRequest,
                "fp8_cache_gib keeps FP8 weight copies on a GPU: it needs device cuda, not cpu");
  if (options.precision != Precision::kFast)
    throw Error(ErrorKind::kInvalidRequest,
                "fp8_cache_gib keeps the FP8 weights of fast precision: it needs precision fast, not exact");
  o.fp8_cache_bytes = static_cast<int64_t>(std::min(gib, 1.0e6) * static_cast<double>(int64_t{1} << 30));
  return o;
}

std::shared_ptr<DeviceBackbone> make_device_backbone(const Release& release, const EngineOptions& options,
                                                     const BackendOptions& backend_options) {
  if (options.device.empty() || options.device == "cpu") return nullptr;
  struct Device {
    std::shared_ptr<const Backend> backend;
    std::unique_ptr<Backbone> backbone;  // destroyed before the backend it lives on
    std::mutex mutex;                    // one prefill at a time on the device
    ~Device() { backbone.reset(); }
  };
  auto d = std::make_shared<Device>();
  d->backend = make_backend(options.device, options.precision, backend_options);
  d->backbone = std::make_unique<Backbone>(release, *d->backend);
  d->backend->synchronize();  // the weights are resident before the first request
  const Backbone::Lend lend = head_on_device(options) ? Backbone::Lend::kDevice : Backbone::Lend::kHost;
  return std::make_shared<DeviceBackbone>([d, lend](std::span<const BackboneSequence> seqs) {
    std::lock_guard lock(d->mutex);
    return d->backbone->forward_lent(seqs, lend);
  });
}

std::shared_ptr<const Backend> make_device_head_backend(const EngineOptions& options) {
  if (!head_on_device(options)) return nullptr;
  BackendOptions o;
  o.keep_matmul_weights = true;  // the head's weights live as long as the engine
  return make_backend(options.device, options.precision, o);
}

}  // namespace stave
