// Calibration data for AWQ (`stave quantize --awq --calib FILE`): token sequences read from
//   FILE.txt    samples separated by blank lines (paragraphs);
//   FILE.jsonl  one JSON value per line: a string, {"text": "..."} (the pile-val layout Quark's
//               examples use) or {"input_ids": [...]} (already tokenized).
// Like Quark's calibration loader, the first `samples` non-empty samples are used, each
// truncated to `seq_len` tokens.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace stave::quantize {

struct CalibrationOptions {
  int64_t samples = 128;
  int64_t seq_len = 512;
};

using TokenizeFn = std::function<std::vector<int32_t>(std::string_view text)>;

inline constexpr size_t kMaxCalibrationBytes = size_t{1} << 30;  // refused before reading

// Throws stave::Error(kInvalidRequest) naming the file (and line) for an unreadable or
// malformed file, an unknown extension, or a file without any usable sample.
std::vector<std::vector<int32_t>> read_calibration(const std::string& path, const CalibrationOptions& options,
                                                   const TokenizeFn& tokenize);

// The same on the file's text: `jsonl` picks the layout, `path` names the file in messages.
std::vector<std::vector<int32_t>> parse_calibration(const std::string& text, const std::string& path, bool jsonl,
                                                    const CalibrationOptions& options, const TokenizeFn& tokenize);

}  // namespace stave::quantize
