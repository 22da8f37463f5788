// Where the backbone runs: EngineOptions::device picks the CPU ("cpu") or a device backend
// ("cuda", only in builds with -DSTAVE_CUDA=ON); the model code is the same Backbone either
// way (src/model/backbone.h over the backend of src/backends/registry.h). The joint head, the
// vision tower and the encoding stay on the host (the head's L-row work excepted, below).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "io/release.h"
#include "model/backbone.h"
#include "ops/backend.h"
#include "stave/options.h"

namespace stave {

// The backbone on a non-CPU device: one packed prefill of one or more sequences, each with
// Backbone::forward's contract; the hidden states are lent (see LentHiddenStates), not copied:
// left in the GPU's memory when the joint head's L-row work runs there too
// (make_device_head_backend), in host memory otherwise.
using DeviceBackbone = std::function<LentHiddenStates(std::span<const BackboneSequence>)>;

// nullptr for device "cpu"; the backbone on the device's backend (made with `backend_options`,
// device_backend_options' result) otherwise. An unknown device, or "cuda" in a build without
// CUDA or on a machine without a GPU, is an Error naming it. The returned object owns the backend
// and the model's resident weights; `release` must outlive it.
std::shared_ptr<DeviceBackbone> make_device_backbone(const Release& release, const EngineOptions& options,
                                                     const BackendOptions& backend_options);

// The backend options of the backbone's device, from the engine's (fp8_cache_gib). A size that
// is negative or not finite, or a cache asked for on the CPU or in exact precision, is an
// InvalidRequest naming the option; Engine::load and LanguageModel::load check it first.
BackendOptions device_backend_options(const EngineOptions& options);

// The backend for the joint head's products over all L rows (memory and key/value
// projections) when the backbone runs on a GPU in fast precision: the GPU's, with the head's
// fp32 weights resident there. nullptr otherwise, and the head runs on the CPU backend (exact
// precision keeps the head on the reference kernels, which follow torch's CPU order).
std::shared_ptr<const Backend> make_device_head_backend(const EngineOptions& options);

}  // namespace stave
