#include "request_files.h"

#include <filesystem>
#include <string_view>

#include "decide/image_input.h"
#include "decide/request_handle.h"
#include "stave/errors.h"
#include "text/json_value.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {
namespace fs = std::filesystem;

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// The media type from the file's signature (its name may say anything).
std::string sniff_image_type(std::string_view b) {
  if (b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return "image/png";
  if (b.size() >= 3 && b.substr(0, 3) == "\xFF\xD8\xFF") return "image/jpeg";
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return "image/webp";
  return "";
}

JsonValue inline_image_file(const std::string& path, const std::string& base_dir, const std::string& label) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base_dir) / p;
  if (!fs::is_regular_file(p))
    throw Error(ErrorKind::kInvalidRequest, label + "no image file " + p.string() +
                                                " (images are data URLs, {\"content_type\", \"base64\"} objects, "
                                                "or, on the command line, paths of PNG, JPEG or WebP files)");
  std::string bytes = read_file(p.string());
  const std::string type = sniff_image_type(bytes);
  if (type.empty())
    throw Error(ErrorKind::kInvalidRequest, label + p.string() + " is not a PNG, JPEG or WebP file");
  return JsonValue::object({{"content_type", JsonValue::string(type)},
                            {"base64", JsonValue::string(encode_base64(bytes))}});
}

// The container from the file's signature: EBML (WebM/Matroska) or an ISO BMFF box (MP4/MOV).
std::string sniff_video_type(std::string_view b) {
  if (b.size() >= 4 && b.substr(0, 4) == std::string_view("\x1A\x45\xDF\xA3", 4)) return "video/x-matroska";
  if (b.size() >= 12)
    for (const char* box : {"ftyp", "moov", "mdat", "free", "wide", "skip"})
      if (b.substr(4, 4) == box) return "video/mp4";
  return "";
}

JsonValue inline_video_file(const std::string& path, const std::string& base_dir, size_t index) {
  const std::string label = "videos[" + std::to_string(index) + "]: ";
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base_dir) / p;
  if (!fs::is_regular_file(p))
    throw Error(ErrorKind::kInvalidRequest, label + "no video file " + p.string() +
                                                " (videos are data URLs, {\"content_type\", \"base64\"} objects, "
                                                "arrays of images, or, on the command line, paths of MP4, WebM or "
                                                "MKV files)");
  std::string bytes = read_file(p.string());
  const std::string type = sniff_video_type(bytes);
  if (type.empty()) throw Error(ErrorKind::kInvalidRequest, label + p.string() + " is not an MP4, WebM or MKV file");
  return JsonValue::object({{"content_type", JsonValue::string(type)},
                            {"base64", JsonValue::string(encode_base64(bytes))}});
}

bool is_inline_or_remote(const std::string& s) {
  return starts_with_ci(s, "data:") || starts_with_ci(s, "http://") || starts_with_ci(s, "https://");
}

}  // namespace

std::string request_base_dir(const std::string& request_path) {
  if (request_path.empty() || request_path == "-") return ".";
  const fs::path parent = fs::path(request_path).parent_path();
  return parent.empty() ? "." : parent.string();
}

Request parse_cli_request(const std::string& json_text, const std::string& base_dir) {
  JsonValue body = parse_json(json_text);
  if (body.is_object())
    for (auto& [key, value] : body.members()) {
      if (!value.is_array()) continue;
      if (key == "images") {
        for (size_t i = 0; i < value.items().size(); ++i) {
          JsonValue& item = value.items()[i];
          if (item.is_string() && !is_inline_or_remote(item.as_string()))
            item = inline_image_file(item.as_string(), base_dir, "images[" + std::to_string(i) + "]: ");
        }
      } else if (key == "videos") {
        // A path is a video file; an array of paths is a video given as image frames.
        for (size_t i = 0; i < value.items().size(); ++i) {
          JsonValue& item = value.items()[i];
          if (item.is_string() && !is_inline_or_remote(item.as_string())) {
            item = inline_video_file(item.as_string(), base_dir, i);
          } else if (item.is_array()) {
            for (size_t k = 0; k < item.items().size(); ++k) {
              JsonValue& frame = item.items()[k];
              if (frame.is_string() && !is_inline_or_remote(frame.as_string()))
                frame = inline_image_file(frame.as_string(), base_dir,
                                          "videos[" + std::to_string(i) + "]: frame " + std::to_string(k) + ": ");
            }
          }
        }
      }
    }
  return make_request(parse_decision_request(body));
}

}  // namespace stave::cli
