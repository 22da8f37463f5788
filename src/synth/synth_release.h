// `stave synth`: writes a complete release folder with random weights and real shapes, so
// that speed and memory can be measured without the real checkpoints. Weights are streamed to
// disk tensor by tensor (a 27B BF16 release is 54 GB) and are deterministic for a seed.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "io/synthetic_marker.h"

namespace stave::synth {

struct SynthOptions {
  std::string preset = "tiny";      // clef-27b, clef-flash-9b, tiny, alt
  std::optional<int> layers;        // override the layer count
  std::string format = "bf16";      // bf16 | mxfp4
  std::string out;                  // output folder (created)
  uint64_t seed = 0;
  std::string tokenizer;            // tokenizer.json or a folder holding it (+ tokenizer_config.json)
  uint64_t shard_bytes = 5'000'000'000ull;
  // Called as tensors are written: (bytes done, bytes total).
  std::function<void(uint64_t, uint64_t)> progress;
};

// The marker file a synthetic release carries (its presence means "random weights"), and
// is_synthetic_release(dir): io/synthetic_marker.h.
using stave::is_synthetic_release;
using stave::kSynthMarker;

void synth_release(const SynthOptions& options);

}  // namespace stave::synth
