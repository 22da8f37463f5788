#include "decide/video_input.h"

#include "decide/image_input.h"

namespace stave {
namespace {

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower_ascii(s.substr(0, prefix.size())) == prefix;
}

std::string clip(std::string_view s, size_t n = 64) {
  if (s.size() <= n) return std::string(s);
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

constexpr const char* kAllowedTypes = "video/mp4, video/webm or video/x-matroska";
constexpr const char* kForms =
    "a data URL (data:video/mp4;base64,...), an object {\"content_type\", \"base64\"} or an array of images "
    "(its frames)";

VideoItemResult failure(std::string message, std::string type = "value_error") {
  VideoItemResult r;
  r.error = std::move(message);
  r.error_type = std::move(type);
  return r;
}

VideoItemResult decode_item(std::string content_type, std::string_view base64, const VideoItemLimits& limits) {
  const size_t size = base64_decoded_size(base64);
  if (limits.max_bytes && size > *limits.max_bytes)
    return failure("video is " + std::to_string(size) + " bytes; the limit is " + std::to_string(*limits.max_bytes) +
                       " bytes per video",
                   "limit");
  VideoInput v;
  std::string why;
  if (!decode_base64(base64, &v.data, &why)) return failure("invalid base64 video data: " + why);
  if (v.data.empty()) return failure("video data is empty");
  v.content_type = std::move(content_type);
  VideoItemResult r;
  r.video = std::move(v);
  return r;
}

VideoItemResult parse_data_url(std::string_view url, const VideoItemLimits& limits) {
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return failure("data URL has no ',' before its data");
  const std::string_view header = url.substr(5, comma - 5);
  const size_t semi = header.find(';');
  const std::string_view media_type = header.substr(0, semi);
  std::string type = canonical_video_type(media_type);
  if (type.empty())
    return failure("data URL media type must be " + std::string(kAllowedTypes) + ", not '" + clip(media_type) + "'");
  const bool base64 = semi != std::string_view::npos && lower_ascii(header.substr(header.rfind(';') + 1)) == "base64";
  if (!base64) return failure("data URL must be base64-encoded (data:" + type + ";base64,...)");
  return decode_item(std::move(type), url.substr(comma + 1), limits);
}

VideoItemResult parse_frames(const JsonValue& item, const VideoItemLimits& limits) {
  const auto& items = item.items();
  if (items.empty()) return failure("a video given as frames needs at least one image");
  if (limits.max_frames && items.size() > *limits.max_frames)
    return failure("at most " + std::to_string(*limits.max_frames) + " frames are allowed; got " +
                       std::to_string(items.size()),
                   "limit");
  VideoInput v;
  size_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    ImageItemResult r = parse_image_item(items[i], limits.max_bytes, limits.reject_unknown_fields);
    if (!r.image) return failure("frame " + std::to_string(i) + ": " + r.error, r.error_type);
    total += r.image->data.size();
    if (limits.max_bytes && total > *limits.max_bytes)
      return failure("frames total more than " + std::to_string(*limits.max_bytes) + " bytes decoded", "limit");
    v.frames.push_back({std::move(r.image->content_type), std::move(r.image->data)});
  }
  VideoItemResult r;
  r.video = std::move(v);
  return r;
}

}  // namespace

std::string canonical_video_type(std::string_view type) {
  const std::string t = lower_ascii(type);
  if (t == "video/mp4" || t == "video/quicktime") return "video/mp4";
  if (t == "video/webm") return t;
  if (t == "video/x-matroska" || t == "video/matroska") return "video/x-matroska";
  return "";
}

VideoItemResult parse_video_item(const JsonValue& item, const VideoItemLimits& limits) {
  if (item.is_array()) return parse_frames(item, limits);
  if (item.is_string()) {
    const std::string_view s = item.as_string();
    if (starts_with_ci(s, "data:")) return parse_data_url(s, limits);
    if (starts_with_ci(s, "http://") || starts_with_ci(s, "https://"))
      return failure("remote video URLs are not supported; send the video inline as " + std::string(kForms),
                     "unsupported");
    return failure(std::string("must be ") + kForms + "; file paths are not read here");
  }
  if (!item.is_object()) return failure(std::string("must be ") + kForms, "type_error");
  const JsonValue* type = item.find("content_type");
  const JsonValue* data = item.find("base64");
  if (limits.reject_unknown_fields)
    for (const auto& m : item.members())
      if (m.first != "content_type" && m.first != "base64") return failure("unknown field '" + clip(m.first) + "'");
  if (!type || !type->is_string()) return failure("content_type must be a string", type ? "type_error" : "missing");
  std::string canonical = canonical_video_type(type->as_string());
  if (canonical.empty())
    return failure("content_type must be " + std::string(kAllowedTypes) + ", not '" + clip(type->as_string()) + "'");
  if (!data || !data->is_string()) return failure("base64 must be a string", data ? "type_error" : "missing");
  const std::string_view payload = data->as_string();
  if (starts_with_ci(payload, "data:")) return failure("base64 must hold only the base64 data, not a data URL");
  return decode_item(std::move(canonical), payload, limits);
}

}  // namespace stave
