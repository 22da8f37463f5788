// One item of a request's `images` array: a data URL string or {"content_type", "base64"},
// base64-decoded (the pixels are decoded later, by src/vision).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "decide/request.h"

namespace stave {

struct ImageItemResult {
  std::optional<ImageInput> image;  // set when the item is valid
  std::string error;                // otherwise: what is wrong (without the "images[i]: " prefix)
  std::string error_type;           // RequestIssue::type
};

// `max_bytes`: refuse an image whose decoded size would exceed it, before decoding.
// `reject_unknown_fields`: an object item may hold only content_type and base64.
ImageItemResult parse_image_item(const JsonValue& item, std::optional<size_t> max_bytes, bool reject_unknown_fields);

// Strict standard base64 (RFC 4648 alphabet, '=' padding, length a multiple of 4, no
// whitespace). Returns false and a reason when `text` is not that.
bool decode_base64(std::string_view text, std::string* out, std::string* why);
// Standard base64 with '=' padding (what decode_base64 reads back).
std::string encode_base64(std::string_view bytes);
// The decoded size of valid base64 text of this length with this many padding characters.
size_t base64_decoded_size(std::string_view text);

}  // namespace stave
