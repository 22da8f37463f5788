#include "engine/release_from_options.h"

#include <string>

#include "io/checksums.h"
#include "model/model_check.h"
#include "stave/errors.h"

namespace stave {

std::unique_ptr<Release> open_release_for(const EngineOptions& options) {
  const std::string dir = resolve_model_path(options.model, options.revision);
  if (options.verify_checksums) {
    for (const auto& r : verify_sha256sums(dir)) {
      if (r.status == ChecksumResult::Status::kMissing)
        throw Error(ErrorKind::kInvalidModel, dir + ": " + r.file + " is listed in SHA256SUMS but missing");
      if (r.status == ChecksumResult::Status::kMismatch)
        throw Error(ErrorKind::kInvalidModel, dir + ": " + r.file + " does not match its SHA256SUMS entry");
    }
  }
  auto release = open_release(dir);
  check_release_loadable(*release);
  return release;
}

}  // namespace stave
