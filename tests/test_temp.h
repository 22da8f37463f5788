// A scratch folder of this test process's own. CTest runs every test as its own process, many
// at once, so fixed names under ::testing::TempDir() collide between tests; this folder is
// named after the process and removed when it exits.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace stave::test {

// Drop-in for ::testing::TempDir(): a path ending in '/'.
inline const std::string& temp_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() : path(std::filesystem::path(::testing::TempDir()) / ("stave-test-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  static const std::string with_slash = dir.path.string() + "/";
  return with_slash;
}

}  // namespace stave::test
