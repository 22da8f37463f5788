// Helpers for the image/vision tests: the fixture cases' images (data URLs in request.json)
// and a plain base64 decoder (the product's data-URL parsing lives in src/decide).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "io/model_config.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave::test {

inline std::string base64_decode(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) continue;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// (content_type, bytes) of each image of a request.json, in request order: data URL strings
// ("data:image/png;base64,...") or {content_type, base64} objects.
inline std::vector<std::pair<std::string, std::string>> request_images(const std::string& request_path) {
  nlohmann::json req = read_json(request_path);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : req["images"]) {
    if (item.is_object()) {
      out.emplace_back(item["content_type"].get<std::string>(), base64_decode(item["base64"].get<std::string>()));
      continue;
    }
    std::string url = item.get<std::string>();
    size_t comma = url.find(',');
    std::string head = url.substr(0, comma);  // data:image/png;base64
    std::string type = head.substr(5, head.find(';') - 5);
    out.emplace_back(type, base64_decode(url.substr(comma + 1)));
  }
  return out;
}

// The images of a shared fixture case.
inline std::vector<std::pair<std::string, std::string>> case_images(const std::string& case_name) {
  return request_images(fixture("public/cases/" + case_name + "/request.json"));
}

inline ImageProcessorConfig fixture_processor_config() {
  return parse_image_processor_config(read_file(fixture("public/model-bf16/processor_config.json")),
                                      "processor_config.json");
}

}  // namespace stave::test
