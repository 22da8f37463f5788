// The `stave tokenize` contract, run as users run it: JSON array of strings on stdin, one line
// with the array of id arrays on stdout; errors as {"error": {"message"}} with exit status 2.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace stave {
namespace {

struct RunResult {
  int status = -1;
  std::string out;
};

std::string stave_binary() { return std::string(STAVE_BINARY_DIR) + "/stave"; }

// Runs `stave tokenize --tokenizer PATH` with `input` on stdin.
RunResult run_tokenize(const std::string& tokenizer_path, const std::string& input) {
  std::string name = "stave_tokenize_";
  name += std::to_string(::getpid());
  name += "_";
  name += std::to_string(std::rand());
  name += ".json";
  const auto in_path = std::filesystem::temp_directory_path() / name;
  {
    std::ofstream f(in_path, std::ios::binary);
    f << input;
  }
  std::string cmd = "'";
  cmd += stave_binary();
  cmd += "' tokenize --tokenizer '";
  cmd += tokenizer_path;
  cmd += "' < '";
  cmd += in_path.string();
  cmd += "' 2>/dev/null";
  RunResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe != nullptr) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
    const int raw = ::pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  std::filesystem::remove(in_path);
  return r;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    STAVE_REQUIRE_FIXTURE("public/tokenizer/strings.json");
    if (!std::filesystem::exists(stave_binary())) GTEST_SKIP() << "build the stave_cli target first";
  }
};

TEST_F(TokenizeCli, PrintsTheFixtureIdsOnOneLine) {
  const nlohmann::json cases = test::read_json(test::fixture("public/tokenizer/strings.json"));
  nlohmann::json texts = nlohmann::json::array(), expected = nlohmann::json::array();
  for (const auto& c : cases) {
    texts.push_back(c["text"]);
    expected.push_back(c["ids"]);
  }
  // A folder holding tokenizer.json, and the file itself.
  for (const std::string& path : {test::fixture("public/model-bf16"), test::fixture("public/model-bf16/tokenizer.json")}) {
    const RunResult r = run_tokenize(path, texts.dump());
    ASSERT_EQ(r.status, 0) << r.out;
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line";
    EXPECT_EQ(nlohmann::json::parse(r.out), expected);
  }
  const RunResult empty = run_tokenize(test::fixture("public/model-bf16"), "[]");
  EXPECT_EQ(empty.status, 0);
  EXPECT_EQ(nlohmann::json::parse(empty.out), nlohmann::json::array());
}

TEST_F(TokenizeCli, ErrorsAreJsonWithStatus2) {
  const std::string dir = test::fixture("public/model-bf16");
  for (const auto& [path, input] : std::vector<std::pair<std::string, std::string>>{
           {dir, "{not json"},
           {dir, "{\"a\": 1}"},
           {dir, "[\"ok\", 3]"},
           {dir, "[\"\xFF\"]"},
           {"/nonexistent/folder", "[\"x\"]"},
       }) {
    const RunResult r = run_tokenize(path, input);
    EXPECT_EQ(r.status, 2) << input;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.out;
  }
}

}  // namespace
}  // namespace stave
