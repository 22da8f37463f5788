// `stave quantize`: turns a BF16 Clef release into a Quark-compatible MXFP4 release
// (the layout Quark's export writes). Every language-model linear is quantized unless excluded;
// lm_head and the vision tower stay in BF16 and are listed by name in `exclude`. Streaming:
// one tensor at a time is read from the mapped input and written to the output shards, so a
// 54 GB model needs no more memory than its largest tensor's codes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "formats/mxfp4.h"
#include "quantize/weight_edits.h"
#include "util/progress.h"

namespace stave::quantize {

struct QuantizeOptions {
  std::string in_dir;                 // BF16 release folder
  std::string out_dir;                // created; must not exist or be empty
  std::vector<std::string> exclude;   // more linears to keep in BF16: names, re:REGEX or globs
  uint64_t shard_bytes = 5'000'000'000ull;  // like transformers' max_shard_size="5GB"
  mxfp4::ScaleMode scale_mode = mxfp4::ScaleMode::kEven;
  ProgressBar::Mode progress = ProgressBar::Mode::kNever;
  const WeightEdits* edits = nullptr;  // weight changes folded in before quantization (AWQ)
};

struct QuantizeSummary {
  std::vector<std::string> quantized;  // layer names
  std::vector<std::string> excluded;   // as written in quantization_config.exclude (sorted)
  std::vector<std::string> files;      // written, relative to out_dir
  int shards = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data
};

// Which linears are quantized: every language-model linear but lm_head, unless an `exclude`
// pattern matches it. Throws stave::Error(kInvalidRequest) for a pattern that matches no
// linear, and for an exclusion that splits a group vLLM fuses (q/k/v, gate/up,
// in_proj_qkv/in_proj_z, in_proj_b/in_proj_a).
struct LinearSelection {
  std::vector<std::string> quantized;
  std::vector<std::string> excluded;  // sorted, as Quark writes the list
};
LinearSelection select_linears(const ModelConfig& config, const std::vector<std::string>& exclude);

QuantizeSummary quantize_release(const QuantizeOptions& options);

// "5GB" (10^9), "500MB", "2GiB" (2^30), "123" bytes; case-insensitive. Throws
// stave::Error(kInvalidRequest) naming the text otherwise.
uint64_t parse_byte_size(const std::string& text);

}  // namespace stave::quantize
