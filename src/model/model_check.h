// Checks that a release has every tensor the model needs, with the expected shapes and
// supported types, without running anything (used by `stave verify` and on load).
#pragma once
#include "io/release.h"

namespace stave {

// Throws stave::Error(kInvalidModel / kUnsupported) naming the first problem found.
void check_release_loadable(const Release& release);

}  // namespace stave
