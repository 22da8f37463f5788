// Helpers shared by the tests: where the reference fixtures are, and small readers.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/mapped_file.h"

namespace stave::test {

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

}  // namespace stave::test
