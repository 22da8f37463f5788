// A release made by `stave synth` (random weights) carries a marker file; its presence is how
// the engine, the CLI and the Python module know to warn that the answers are meaningless.
#pragma once
#include <filesystem>
#include <string>

namespace stave {

inline constexpr const char* kSynthMarker = "stave_synth.json";

// True when `dir` holds a release made by stave synth.
inline bool is_synthetic_release(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir) / kSynthMarker, ec);
}

}  // namespace stave
