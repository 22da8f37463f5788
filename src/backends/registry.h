// Which backends this build and this machine offer, by device name: the one place that knows
// the backend classes. Everything above (model users, the engine, tools, tests) asks here.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/backend.h"
#include "stave/options.h"

namespace stave {

// The fastest backend this CPU supports for `precision` (exact -> the reference kernels).
const Backend& cpu_backend(Precision precision);

struct BackendOptions {
  // CUDA: the head's fp32 matmul_nt weights stay resident on the GPU, keyed by address (only
  // for weights whose memory never changes while the backend lives, as the engine's head).
  bool keep_matmul_weights = false;
  // CUDA, fast precision: bytes of device memory for E4M3 copies of the MXFP4 weights, kept
  // from upload on so that their products skip the per-product expansion (weights in upload
  // order while the total fits). 0: none, unless STAVE_CUDA_FP8_WEIGHTS=resident asks for all.
  int64_t fp8_cache_bytes = 0;
};

// "cpu": cpu_backend(precision) (shared, never freed); "cuda": a new CUDA backend (one stream,
// its own pools). An unknown device, or one this build or machine lacks, is an Error that
// says why (backend_unavailable_reason).
std::shared_ptr<const Backend> make_backend(std::string_view device, Precision precision,
                                            const BackendOptions& options = {});

// Empty when `device` can run here; otherwise why not ("built without CUDA", "no GPU visible").
std::string backend_unavailable_reason(std::string_view device);

// Every device name this build knows ("cpu", and "cuda" in CUDA builds), available or not.
std::vector<std::string> backend_devices();

}  // namespace stave
