// `stave export-gguf`: a Clef release's backbone as a GGUF file of llama.cpp's `qwen35`
// architecture, so that llama.cpp runs the same shapes and weights as stave (benchmarks).
//
// The mapping follows llama.cpp's own converter (convert_hf_to_gguf.py, Qwen3_5TextModel):
// tensor names, the `qwen35.*` metadata, zero-centred norms stored as 1 + w, A_log stored as
// -exp(A_log), conv1d squeezed, and the linear-attention V heads reordered from grouped
// (by K head) to tiled order. BF16 stays BF16; MXFP4 (Quark) maps losslessly onto GGUF MXFP4 by
// moving the scale byte inline and the nibbles from pairwise to split-half order
// (llama.cpp's block_mxfp4 layout). 1-D tensors and conv1d are F32 as the converter writes
// them. The joint head and the vision tower are not exported (llama.cpp has neither); the
// tokenizer's vocabulary is padded to the embedding's rows with [PADn] tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace stave::gguf {

struct ExportOptions {
  std::string model;  // release folder or repo id
  std::string out;    // .gguf path
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct ExportSummary {
  uint64_t tensors = 0, bytes = 0;
  std::string weight_format;  // "bf16" | "mxfp4"
};

// Throws stave::Error: kUnsupported for a shape llama.cpp's qwen35 cannot express (linear key
// and value head sizes differ, a layer pattern other than every n-th layer full attention).
ExportSummary export_qwen35_gguf(const ExportOptions& options);

// Quark MXFP4 (pairwise nibbles: byte k = element 2k | element 2k+1 << 4, scales apart) → one
// GGUF block_mxfp4 (scale byte, then qs[j] = element j | element j+16 << 4). Exposed for tests.
void quark_block_to_gguf(const uint8_t quark_codes[16], uint8_t scale, uint8_t out[17]);

}  // namespace stave::gguf
