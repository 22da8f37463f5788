// Requests as the command line reads them: a request's `images` may name local files (a path
// in place of a data URL), which the CLI reads and inlines before the request is parsed. Only
// the CLI does this; the server and the library refuse paths (src/decide/image_input).
#pragma once
#include <string>

#include "stave/request.h"

namespace stave::cli {

// The folder relative image paths are resolved against: the request file's folder ("." for
// stdin, "-").
std::string request_base_dir(const std::string& request_path);

// Parses a request, first replacing every `images` item that is a string but neither a data
// URL nor an http(s) URL by the file it names (PNG, JPEG or WebP, told by its first bytes).
// Throws stave::Error naming images[i] and the file when it cannot be read or is no image.
Request parse_cli_request(const std::string& json_text, const std::string& base_dir);

}  // namespace stave::cli
