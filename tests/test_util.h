// Helpers shared by the tests: where the reference fixtures are, and small readers.
#pragma once
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "synth/synth_release.h"
#include "util/mapped_file.h"

namespace stave::test {

// The fixtures' rule: responses are identical after 4-decimal rounding, except where a value
// sits at a rounding edge, where a logit difference far below 1e-4 can move the rounded value
// by one unit (0.0001). Everything else (keys, order, strings, choices) must be identical.
inline bool same_within_one_unit(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  if (a.type() != b.type()) {
    if (a.is_number() && b.is_number()) return std::fabs(a.get<double>() - b.get<double>()) <= 1.0001e-4;
    return false;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia.key() != ib.key() || !same_within_one_unit(ia.value(), ib.value())) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_within_one_unit(a[i], b[i])) return false;
    return true;
  }
  if (a.is_number_float()) return std::fabs(a.get<double>() - b.get<double>()) <= 1.0001e-4;
  return a == b;
}

// ../shared/fixtures next to the checkout, or $STAVE_FIXTURES.
inline std::string fixtures_dir() {
  if (const char* env = std::getenv("STAVE_FIXTURES"); env && *env) return env;
  return STAVE_DEFAULT_FIXTURES;
}
inline std::string fixture(const std::string& rel) { return fixtures_dir() + "/" + rel; }
inline bool fixtures_required() {
  const char* env = std::getenv("STAVE_REQUIRE_FIXTURES");
  return env && *env && std::string(env) != "0";
}

// Skips (or, with STAVE_REQUIRE_FIXTURES=1 as in CI, fails) when the fixtures are absent.
#define STAVE_REQUIRE_FIXTURE(rel)                                                        \
  do {                                                                                    \
    if (!std::filesystem::exists(::stave::test::fixture(rel))) {                          \
      if (::stave::test::fixtures_required()) FAIL() << "missing fixture " << (rel);     \
      GTEST_SKIP() << "fixture " << (rel) << " not found (set STAVE_FIXTURES)";           \
    }                                                                                     \
  } while (0)

// A raw little-endian float32 file (the probe data under tests/data), whole; empty when the
// file is missing, so that the caller's size assertion names it.
inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  if (!f) return v;
  f.seekg(0, std::ios::end);
  v.resize(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(stave::read_file(path));
}

// The public fixture cases, sorted by name.
inline std::vector<std::string> fixture_cases() {
  std::vector<std::string> out;
  std::filesystem::path dir = fixture("public/cases");
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The "alt" release (every dimension differs from the fixture's: d_k ≠ d_v, conv kernel 3,
// GQA 3, rotary 0.5, θ 1e6, eps 1e-5, 5 layers): `stave synth --preset alt --seed 1` with the
// fixture's tokenizer, written afresh under the test temp folder as `<tag>-alt-<format>` (a tag
// per test binary, so tests running side by side never share one). Its reference outputs
// (transformers 5.17, fp32) are in tests/data/alt.
inline std::string synth_alt_release(const std::string& format, const std::string& tag) {
  const std::string dir = stave::test::temp_dir() + "/" + tag + "-alt-" + format;
  std::filesystem::remove_all(dir);
  synth::SynthOptions o;
  o.preset = "alt";
  o.format = format;
  o.out = dir;
  o.seed = 1;
  o.tokenizer = fixture("public/model-bf16/tokenizer.json");
  synth::synth_release(o);
  return dir;
}

}  // namespace stave::test
