// `stave eval --data` on the public fixtures (issue 25's "done when"): labels are the BF16
// reference's top choices, taken from the fixtures' expected-bf16.json logits; BF16 exact must
// score 1.0, and MXFP4 exact's accuracy, top-1 agreement and mean KL(BF16 ‖ MXFP4) must be what
// the fixtures' own logits give. Also: a bad line is reported and skipped, --out resumes, and
// --report writes a page.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "test_util.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string stave_binary() { return std::string(STAVE_BINARY_DIR) + "/stave"; }

struct CliRun {
  int status = -1;
  std::string out, err;
};

CliRun run_stave(const std::string& args, const std::string& err_path) {
  std::string cmd = "'";
  cmd += stave_binary();
  cmd += "' ";
  cmd += args;
  cmd += " 2>'";
  cmd += err_path;
  cmd += "'";
  CliRun r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.err = read_file(err_path);
  return r;
}

size_t argmax(const Json& logits) {
  size_t best = 0;
  for (size_t k = 1; k < logits.size(); ++k)
    if (logits[k].get<double>() > logits[best].get<double>()) best = k;
  return best;
}

std::vector<double> log_softmax(const Json& logits) {
  double m = -INFINITY;
  for (const auto& v : logits) m = std::max(m, v.get<double>());
  double s = 0;
  for (const auto& v : logits) s += std::exp(v.get<double>() - m);
  std::vector<double> out;
  for (const auto& v : logits) out.push_back(v.get<double>() - m - std::log(s));
  return out;
}

// What the fixture logits give for one group of cases (same max_length).
struct Group {
  std::vector<std::string> lines;  // labelled records
  int64_t questions = 0, mxfp4_correct = 0;
  double sum_kl = 0;
};

std::map<int64_t, Group> build_groups() {
  std::map<int64_t, Group> groups;
  for (const std::string& name : test::fixture_cases()) {
    const std::string dir = test::fixture("public/cases/" + name);
    const Json bf16 = test::read_json(dir + "/expected-bf16.json");
    const Json mx = test::read_json(dir + "/expected-mxfp4.json");
    if (bf16.contains("error") || mx.contains("error")) continue;  // the request is refused
    Group& g = groups[bf16.at("max_length").get<int64_t>()];
    Json labels = Json::object();
    for (size_t q = 0; q < bf16.at("questions").size(); ++q) {
      const Json& spec = bf16["questions"][q];
      const Json& lb = bf16["logits"][q];
      const Json& lm = mx["logits"][q];
      const std::string label = spec["option_ids"][argmax(lb)];
      labels[spec["id"].get<std::string>()] = label;
      ++g.questions;
      if (argmax(lm) == argmax(lb)) ++g.mxfp4_correct;
      const auto pb = log_softmax(lb), pm = log_softmax(lm);
      for (size_t k = 0; k < pb.size(); ++k) g.sum_kl += std::exp(pb[k]) * (pb[k] - pm[k]);
    }
    std::string request = read_file(dir + "/request.json");
    for (char& c : request)
      if (c == '\n' || c == '\r') c = ' ';  // JSON strings hold no raw line breaks: only whitespace changes
    g.lines.push_back("{\"request\": " + request + ", \"labels\": " + labels.dump() + "}");
  }
  return groups;
}

class EvalFixtures : public ::testing::Test {
 protected:
  void SetUp() override {
    STAVE_REQUIRE_FIXTURE("public/cases");
    if (!fs::exists(stave_binary())) GTEST_SKIP() << "build the stave_cli target first";
    dir_ = stave::test::temp_dir() + "/eval_fixtures";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string dir_;
};

TEST_F(EvalFixtures, LabelsFromTheBf16ReferenceGiveTheFixtureMetrics) {
  const std::string bf16 = test::fixture("public/model-bf16"), mxfp4 = test::fixture("public/model-mxfp4");
  const auto groups = build_groups();
  ASSERT_GE(groups.size(), 1u);
  // The smallest group also runs without --against (one model: only its accuracy).
  int64_t smallest = groups.begin()->first;
  for (const auto& [max_length, g] : groups)
    if (g.lines.size() < groups.at(smallest).lines.size()) smallest = max_length;
  for (const auto& [max_length, g] : groups) {
    SCOPED_TRACE("max_length " + std::to_string(max_length));
    const std::string data = dir_ + "/labelled-" + std::to_string(max_length) + ".jsonl";
    {
      std::ofstream f(data);
      for (const auto& l : g.lines) f << l << "\n";
      f << "{\"request\": {\"model\": \"clef\"}, \"labels\": {}}\n";  // bad: no state, no questions
    }
    const std::string common = " --precision exact --against-precision exact --threads 1 --max-length " +
                               std::to_string(max_length) + " --data '" + data + "' --json";
    if (max_length == smallest) {
      // Without --against: only the model's accuracy (BF16 against its own reference labels).
      const CliRun b = run_stave("eval --model '" + bf16 + "'" + common, dir_ + "/err-b");
      ASSERT_EQ(b.status, 0) << b.out << b.err;
      const Json jb = Json::parse(b.out);
      EXPECT_EQ(jb["records"], g.lines.size());
      EXPECT_EQ(jb["questions"], g.questions);
      EXPECT_EQ(jb["model"]["accuracy"].get<double>(), 1.0);
      EXPECT_FALSE(jb.contains("against"));
      EXPECT_FALSE(jb.contains("mean_kl"));
      EXPECT_EQ(jb["bad_records"], 1);
    }
    const std::string out = dir_ + "/results-" + std::to_string(max_length) + ".jsonl";
    const std::string report = dir_ + "/report-" + std::to_string(max_length) + ".html";
    const std::string args = "eval --model '" + mxfp4 + "' --against '" + bf16 + "'" + common + " --out '" + out +
                             "' --report '" + report + "'";
    const CliRun m = run_stave(args, dir_ + "/err-m");
    ASSERT_EQ(m.status, 0) << m.out << m.err;
    const Json jm = Json::parse(m.out);
    const double n = static_cast<double>(g.questions);
    EXPECT_EQ(jm["records"], g.lines.size());
    EXPECT_EQ(jm["questions"], g.questions);
    EXPECT_EQ(jm["against"]["accuracy"].get<double>(), 1.0);  // BF16 exact against the BF16 reference's labels
    EXPECT_EQ(jm["bad_records"], 1);
    EXPECT_NE(m.err.find("line " + std::to_string(g.lines.size() + 1) + ": model and state are required"),
              std::string::npos)
        << m.err;
    EXPECT_NEAR(jm["model"]["accuracy"].get<double>(), g.mxfp4_correct / n, 1e-6);
    EXPECT_NEAR(jm["top1_agreement"].get<double>(), g.mxfp4_correct / n, 1e-6);
    EXPECT_NEAR(jm["mean_kl"].get<double>(), g.sum_kl / n, 1e-6);
    EXPECT_GT(jm["max_abs_dp"].get<double>(), 0.0);
    EXPECT_NE(read_file(report).find("<svg"), std::string::npos);

    // A rerun with the same --out takes every record from it and prints the same summary.
    const CliRun again = run_stave(args, dir_ + "/err-again");
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(Json::parse(again.out), jm);
    EXPECT_NE(again.err.find(std::to_string(g.lines.size() + 1) + " records taken from"), std::string::npos)
        << again.err;
  }
}

}  // namespace
}  // namespace stave
