// Reading AWQ calibration files (src/quantize/calibration.h): .txt paragraphs, .jsonl strings,
// {"text"} and {"input_ids"} lines, sample count and truncation, and the errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "quantize/calibration.h"
#include "stave/errors.h"
#include "test_errors.h"

namespace stave::quantize {
namespace {
namespace fs = std::filesystem;

// A stand-in tokenizer: one id per byte.
std::vector<int32_t> bytes(std::string_view s) { return std::vector<int32_t>(s.begin(), s.end()); }

std::string write(const std::string& name, const std::string& text) {
  fs::path p = fs::path(stave::test::temp_dir()) / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

using test::error_of;

TEST(Calibration, TextParagraphsAreSamples) {
  std::string p = write("calib.txt", "ab\ncd\n\n\n  \nxyz\n\nlast");
  auto s = read_calibration(p, {}, bytes);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], bytes("ab\ncd"));
  EXPECT_EQ(s[1], bytes("xyz"));
  EXPECT_EQ(s[2], bytes("last"));
  CalibrationOptions o;
  o.samples = 2;
  o.seq_len = 2;
  s = read_calibration(p, o, bytes);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], bytes("ab"));
  EXPECT_EQ(s[1], bytes("xy"));
}

TEST(Calibration, JsonlTextStringsAndIds) {
  std::string p = write("calib.jsonl", "{\"text\": \"hello\", \"meta\": 1}\n\n\"hi\"\n{\"input_ids\": [5, 6, 7]}\n");
  auto s = read_calibration(p, {}, bytes);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], bytes("hello"));
  EXPECT_EQ(s[1], bytes("hi"));
  EXPECT_EQ(s[2], (std::vector<int32_t>{5, 6, 7}));
}

TEST(Calibration, ErrorsNameTheFileAndLine) {
  EXPECT_NE(error_of([] { read_calibration(write("c1.jsonl", "\"ok\"\n{oops\n"), {}, bytes); }).find("c1.jsonl line 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration(write("c2.jsonl", "{\"input_ids\": [1, -2]}\n"), {}, bytes); })
                .find("not a token id"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration(write("c3.jsonl", "[1]\n"), {}, bytes); }).find("neither a string"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration(write("c4.csv", "x"), {}, bytes); }).find(".txt or .jsonl"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration(write("c5.txt", "\n\n  \n"), {}, bytes); }).find("no non-empty sample"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration("/nonexistent/x.txt", {}, bytes); }).find("does not exist"),
            std::string::npos);
  // An empty file (or /dev/null, which is no regular file) is empty, not missing.
  EXPECT_NE(error_of([] { read_calibration(write("c6.txt", ""), {}, bytes); }).find("c6.txt is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration("/dev/null", {}, bytes); }).find("calibration file /dev/null is empty"),
            std::string::npos);
}

}  // namespace
}  // namespace stave::quantize
