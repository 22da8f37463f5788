#include "quantize/calibration.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "util/json_limits.h"
#include "util/mapped_file.h"

namespace stave::quantize {
namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::kInvalidRequest, what); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::vector<int32_t>> read_calibration(const std::string& path, const CalibrationOptions& o,
                                                   const TokenizeFn& tokenize) {
  if (o.samples <= 0) bad("--calib-samples must be positive");
  if (o.seq_len <= 0) bad("--seq-len must be positive");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) bad("calibration file " + path + " does not exist");
  if (std::filesystem::is_directory(path, ec)) bad("calibration file " + path + " is a folder");
  std::string text;
  try {
    text = read_file(path, kMaxCalibrationBytes);  // /dev/stdin and other non-regular files read too
  } catch (const Error& e) {
    bad(std::string("cannot read calibration file: ") + e.what());
  }
  if (text.empty()) bad("calibration file " + path + " is empty");
  const bool jsonl = ends_with(path, ".jsonl");
  if (!jsonl && !ends_with(path, ".txt")) bad("calibration file " + path + " must be .txt or .jsonl");
  return parse_calibration(text, path, jsonl, o, tokenize);
}

std::vector<std::vector<int32_t>> parse_calibration(const std::string& text, const std::string& path, bool jsonl,
                                                    const CalibrationOptions& o, const TokenizeFn& tokenize) {
  if (o.samples <= 0) bad("--calib-samples must be positive");
  if (o.seq_len <= 0) bad("--seq-len must be positive");
  if (text.size() > kMaxCalibrationBytes)
    bad("calibration file " + path + " is larger than the limit of " + std::to_string(kMaxCalibrationBytes) + " bytes");
  std::vector<std::vector<int32_t>> out;
  auto add = [&](std::vector<int32_t> ids) {
    if (ids.empty()) return;
    if (static_cast<int64_t>(ids.size()) > o.seq_len) ids.resize(static_cast<size_t>(o.seq_len));
    out.push_back(std::move(ids));
  };
  std::istringstream in(text);
  std::string line;
  if (jsonl) {
    int64_t n = 0;
    while (static_cast<int64_t>(out.size()) < o.samples && std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = path + " line " + std::to_string(n);
      try {
        check_json_depth(line, where);
      } catch (const Error& e) {
        bad(e.what());
      }
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) bad(where + " is not valid JSON");
      if (j.is_string()) {
        add(tokenize(j.get<std::string>()));
      } else if (j.is_object() && j.contains("input_ids")) {
        const auto& ids = j["input_ids"];
        if (!ids.is_array()) bad(where + ": input_ids is not an array");
        std::vector<int32_t> v;
        for (const auto& id : ids) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            bad(where + ": input_ids holds " + id.dump() + ", not a token id");
          if (static_cast<int64_t>(v.size()) < o.seq_len) v.push_back(static_cast<int32_t>(id.get<int64_t>()));
        }
        add(std::move(v));
      } else if (j.is_object() && j.contains("text") && j["text"].is_string()) {
        add(tokenize(j["text"].get<std::string>()));
      } else {
        bad(where + " is neither a string nor an object with \"text\" or \"input_ids\"");
      }
    }
  } else {
    std::string paragraph;
    auto flush = [&] {
      if (paragraph.find_first_not_of(" \t\r\n") != std::string::npos) add(tokenize(paragraph));
      paragraph.clear();
    };
    while (static_cast<int64_t>(out.size()) < o.samples && std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) {
        flush();
      } else {
        if (!paragraph.empty()) paragraph += "\n";
        paragraph += line;
      }
    }
    if (static_cast<int64_t>(out.size()) < o.samples) flush();
  }
  if (out.empty()) bad("calibration file " + path + " holds no non-empty sample");
  return out;
}

}  // namespace stave::quantize
