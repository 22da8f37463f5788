// Model shapes for `stave synth`: the real Clef (27B) and Clef-flash (9B) shapes from the spec,
// a tiny model for demos and tests, and "alt", a tiny model whose every dimension differs from
// the fixture's (used to check that nothing is hard-coded).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stave::synth {

struct Preset {
  std::string name;
  nlohmann::ordered_json config;           // config.json (Qwen3_5ForConditionalGeneration)
  nlohmann::ordered_json head_config;      // joint_head_config.json
  nlohmann::ordered_json preprocessor;     // preprocessor_config.json
};

std::vector<std::string> preset_names();
// Throws stave::Error(kInvalidRequest) for an unknown name. `layers` overrides the layer count
// (keeping the 3:1 linear/full pattern).
Preset make_preset(const std::string& name, std::optional<int> layers = std::nullopt);

}  // namespace stave::synth
