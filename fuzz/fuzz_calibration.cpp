// The calibration file of `stave quantize --awq --calib FILE` (quantize::parse_calibration, what
// read_calibration runs on the file's text) on arbitrary bytes. The first byte picks the layout
// (odd: FILE.jsonl, even: FILE.txt); the tokenizer is one id per byte (the real one is fuzzed by
// fuzz_request). It must either throw stave::Error or return at most `samples` non-empty
// sequences of at most `seq_len` valid ids.
// Seeds: fuzz/corpus/fuzz_calibration/ (the layouts Quark's examples and stave's docs use).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "quantize/calibration.h"
#include "stave/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool jsonl = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  stave::quantize::CalibrationOptions o;
  o.samples = 8;
  o.seq_len = 64;
  const auto bytes = [](std::string_view s) {
    std::vector<int32_t> ids;
    for (unsigned char c : s) ids.push_back(c);
    return ids;
  };
  try {
    const auto samples = stave::quantize::parse_calibration(text, jsonl ? "calib.jsonl" : "calib.txt", jsonl, o, bytes);
    if (samples.empty() || static_cast<int64_t>(samples.size()) > o.samples) std::abort();
    for (const auto& s : samples) {
      if (s.empty() || static_cast<int64_t>(s.size()) > o.seq_len) std::abort();
      for (int32_t id : s)
        if (id < 0) std::abort();
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
