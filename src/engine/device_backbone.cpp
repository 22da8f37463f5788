#include "engine/device_backbone.h"

#include <mutex>

#include "backends/registry.h"

namespace stave {
namespace {

// The head's L-row work runs on the GPU (fast precision on CUDA): the backbone then lends its
// hidden states there.
bool head_on_device(const EngineOptions& options) {
  return options.device == "cuda" && options.precision != Precision::kExact;
}

}  // namespace

std::shared_ptr<DeviceBackbone> make_device_backbone(const Release& release, const EngineOptions& options) {
  if (options.device.empty() || options.device == "cpu") return nullptr;
  struct Device {
    std::shared_ptr<const Backend> backend;
    std::unique_ptr<Backbone> backbone;  // destroyed before the backend it lives on
    std::mutex mutex;                    // one prefill at a time on the device
    ~Device() { backbone.reset(); }
  };
  auto d = std::make_shared<Device>();
  d->backend = make_backend(options.device, options.precision);
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
