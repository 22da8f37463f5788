// Request images: data URLs and {content_type, base64} objects, decoded with OpenSSL.
#include "decide/image_input.h"

#include <algorithm>
#include <climits>

#include <openssl/evp.h>

namespace stave {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// The media types stave's image decoders read; "" when `type` is none of them.
std::string canonical_content_type(std::string_view type) {
  std::string t = lower_ascii(type);
  if (t == "image/png" || t == "image/jpeg" || t == "image/webp") return t;
  return "";
}

// At most n bytes of a UTF-8 string, never cutting a character (error messages quote input).
std::string clip(std::string_view s, size_t n = 64) {
  if (s.size() <= n) return std::string(s);
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

constexpr const char* kAllowedTypes = "image/png, image/jpeg or image/webp";
constexpr const char* kForms = "a data URL (data:image/png;base64,...) or an object {\"content_type\", \"base64\"}";

ImageItemResult failure(std::string message, std::string type = "value_error") {
  ImageItemResult r;
  r.error = std::move(message);
  r.error_type = std::move(type);
  return r;
}

ImageItemResult decode_item(std::string content_type, std::string_view base64, std::optional<size_t> max_bytes) {
  size_t size = base64_decoded_size(base64);
  if (max_bytes && size > *max_bytes) {
    return failure("image is " + std::to_string(size) + " bytes; the limit is " + std::to_string(*max_bytes) +
                       " bytes per image",
                   "limit");
  }
  ImageItemResult r;
  ImageInput image;
  std::string why;
  if (!decode_base64(base64, &image.data, &why)) return failure("invalid base64 image data: " + why);
  if (image.data.empty()) return failure("image data is empty");
  image.content_type = std::move(content_type);
  r.image = std::move(image);
  return r;
}

ImageItemResult parse_data_url(std::string_view url, std::optional<size_t> max_bytes) {
  size_t comma = url.find(',');
  if (comma == std::string_view::npos) return failure("data URL has no ',' before its data");
  std::string_view header = url.substr(5, comma - 5);  // after "data:"
  std::string_view payload = url.substr(comma + 1);
  size_t semi = header.find(';');
  std::string_view media_type = header.substr(0, semi);
  std::string type = canonical_content_type(media_type);
  if (type.empty()) {
    return failure("data URL media type must be " + std::string(kAllowedTypes) + ", not '" +
                   clip(media_type) + "'");
  }
  // Parameters may precede ";base64", which must come last.
  bool base64 = semi != std::string_view::npos && lower_ascii(header.substr(header.rfind(';') + 1)) == "base64";
  if (!base64) return failure("data URL must be base64-encoded (data:" + type + ";base64,...)");
  return decode_item(std::move(type), payload, max_bytes);
}

}  // namespace

size_t base64_decoded_size(std::string_view text) {
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  size_t full = text.size() / 4 * 3;
  return full >= pad ? full - pad : 0;
}

std::string encode_base64(std::string_view bytes) {
  std::string out;
  // EVP_EncodeBlock takes an int length: encode in chunks of whole 3-byte groups.
  constexpr size_t kChunk = size_t{3} << 20;
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const size_t n = std::min(kChunk, bytes.size() - at);
    const size_t offset = out.size();
    out.resize(offset + (n + 2) / 3 * 4 + 1);
    int wrote = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + offset),
                                reinterpret_cast<const unsigned char*>(bytes.data() + at), static_cast<int>(n));
    out.resize(offset + static_cast<size_t>(wrote));
  }
  return out;
}

bool decode_base64(std::string_view text, std::string* out, std::string* why) {
  out->clear();
  if (text.size() % 4 != 0) {
    *why = "length " + std::to_string(text.size()) + " is not a multiple of 4 (missing '=' padding?)";
    return false;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (alpha) continue;
    // '=' only as the last one or two characters.
    if (c == '=' && i + 2 >= text.size() && (i + 1 == text.size() || text[i + 1] == '=') && i % 4 >= 2) continue;
    std::string what;
    if (c == '=') {
      what = "'=' padding";
    } else if (c >= 0x20 && c < 0x7f) {
      what = "character '";
      what.push_back(static_cast<char>(c));
      what += "'";
    } else {
      what = "byte " + std::to_string(c);
    }
    what += " at position ";
    what += std::to_string(i);
    what += c == '=' ? " is not at the end" : " is not base64";
    *why = std::move(what);
    return false;
  }
  if (text.empty()) return true;
  // EVP_DecodeBlock takes an int length; decode in chunks (multiples of 4 characters) so any
  // size works.
  constexpr size_t kChunk = size_t{1} << 30;
  std::string decoded;
  decoded.resize(text.size() / 4 * 3);
  size_t written = 0;
  for (size_t pos = 0; pos < text.size(); pos += kChunk) {
    size_t n = std::min(kChunk, text.size() - pos);
    int got = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data() + written),
                              reinterpret_cast<const unsigned char*>(text.data() + pos), static_cast<int>(n));
    if (got < 0) {
      *why = "OpenSSL refused the data";
      return false;
    }
    written += static_cast<size_t>(got);
  }
  // EVP_DecodeBlock counts the padding as zero bytes; drop them.
  decoded.resize(base64_decoded_size(text));
  *out = std::move(decoded);
  return true;
}

ImageItemResult parse_image_item(const JsonValue& item, std::optional<size_t> max_bytes, bool reject_unknown_fields) {
  if (item.is_string()) {
    std::string_view s = item.as_string();
    if (starts_with_ci(s, "data:")) return parse_data_url(s, max_bytes);
    if (starts_with_ci(s, "http://") || starts_with_ci(s, "https://")) {
      return failure("remote image URLs are not supported; send the image inline as " + std::string(kForms),
                     "unsupported");
    }
    // A file path or anything else: only the command line reads local files (it inlines them
    // before the request reaches this parser); a server never opens paths it is sent.
    return failure(std::string("must be ") + kForms + "; file paths are not read here");
  }
  if (!item.is_object()) return failure(std::string("must be ") + kForms, "type_error");
  const JsonValue* type = item.find("content_type");
  const JsonValue* data = item.find("base64");
  if (reject_unknown_fields) {
    for (const auto& m : item.members())
      if (m.first != "content_type" && m.first != "base64") return failure("unknown field '" + clip(m.first) + "'");
  }
  if (!type || !type->is_string()) return failure("content_type must be a string", type ? "type_error" : "missing");
  std::string canonical = canonical_content_type(type->as_string());
  if (canonical.empty()) {
    return failure("content_type must be " + std::string(kAllowedTypes) + ", not '" +
                   clip(type->as_string()) + "'");
  }
  if (!data || !data->is_string()) return failure("base64 must be a string", data ? "type_error" : "missing");
  std::string_view payload = data->as_string();
  if (starts_with_ci(payload, "data:")) return failure("base64 must hold only the base64 data, not a data URL");
  return decode_item(std::move(canonical), payload, max_bytes);
}

}  // namespace stave
