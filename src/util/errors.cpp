#include "stave/errors.h"

namespace stave {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidRequest: return "invalid_request";
    case ErrorKind::kRequestTooLarge: return "request_too_large";
    case ErrorKind::kInvalidModel: return "invalid_model";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kIo: return "io_error";
    case ErrorKind::kInternal: return "internal_error";
  }
  return "unknown";
}

}  // namespace stave
