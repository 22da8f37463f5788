// The release an EngineOptions names, opened as every front of the engine opens it: the model
// resolved (folder, or repo id + revision in the Hugging Face cache), SHA256SUMS checked when
// options.verify_checksums, the folder opened and checked loadable. Engine and LanguageModel
// both load through it, so they accept and refuse the same folders with the same messages.
#pragma once
#include <memory>

#include "io/release.h"
#include "stave/options.h"

namespace stave {

std::unique_ptr<Release> open_release_for(const EngineOptions& options);

}  // namespace stave
