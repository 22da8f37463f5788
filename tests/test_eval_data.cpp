// stave eval's labelled data: the record format, the documented --sample draw, CSV reading,
// the classify adapter (151 labels), the resumable results file and the metrics.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_temp.h"
#include "eval/classify_adapter.h"
#include "eval/label_scoring.h"
#include "eval/labelled_data.h"
#include "eval/results_log.h"
#include "io/csv_reader.h"
#include "stave/errors.h"

namespace stave::eval {
namespace {

const char* kRecord =
    R"({"request": {"model": "clef", "state": "Card was declined", "questions": {"intent": {"type": "choice", "criteria": {"card_declined": "Card declined", "refund": "Refund"}}, "urgent": {"type": "noul"}}}, "labels": {"intent": "card_declined", "urgent": false}})";

TEST(EvalData, ParsesALabelledRecord) {
  const LabelledRecord r = parse_labelled_line(kRecord, 3);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.line, 3);
  EXPECT_EQ(r.key.substr(0, 2), "3:");
  EXPECT_EQ(r.key.size(), 2u + 16u);
  ASSERT_EQ(r.labels.size(), 2u);
  EXPECT_EQ(r.labels[0], (std::pair<std::string, std::string>{"intent", "card_declined"}));
  EXPECT_EQ(r.labels[1], (std::pair<std::string, std::string>{"urgent", "false"}));
  EXPECT_EQ(r.request.questions.size(), 2u);
  EXPECT_EQ(r.state_excerpt, "Card was declined");
}

TEST(EvalData, BadRecordsCarryAnErrorNamingTheProblem) {
  EXPECT_NE(parse_labelled_line("{not json", 1).error, "");
  EXPECT_NE(parse_labelled_line("[1]", 1).error.find("object"), std::string::npos);
  EXPECT_NE(parse_labelled_line(R"({"labels": {}})", 1).error.find("\"request\""), std::string::npos);
  const std::string no_state = R"({"request": {"model": "clef", "questions": {"a": {"type": "noul"}}}})";
  EXPECT_NE(parse_labelled_line(no_state, 1).error.find("state"), std::string::npos);
  std::string bad_option = kRecord;
  bad_option.replace(bad_option.find("\"intent\": \"card_declined\""), 25, "\"intent\": \"nope\"");
  EXPECT_NE(parse_labelled_line(bad_option, 1).error.find("\"nope\""), std::string::npos);
  std::string bad_question = kRecord;
  bad_question.replace(bad_question.find("\"urgent\": false"), 15, "\"other\": \"true\"");
  EXPECT_NE(parse_labelled_line(bad_question, 1).error.find("\"other\""), std::string::npos);
}

TEST(EvalData, ReadsEveryNonBlankLineAndKeepsBadOnes) {
  const std::string path = stave::test::temp_dir() + "/eval_data_lines.jsonl";
  std::ofstream(path) << kRecord << "\n\n{bad\n" << kRecord << "\r\n";
  const auto records = read_labelled_jsonl(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].line, 1);
  EXPECT_EQ(records[1].line, 3);
  EXPECT_NE(records[1].error, "");
  EXPECT_EQ(records[2].line, 4);
  EXPECT_EQ(records[2].error, "");
  EXPECT_NE(records[0].key, records[2].key);  // same text, other line
  EXPECT_THROW(read_labelled_jsonl(path + ".missing"), Error);
}

// The draw as docs/eval.md describes it, written out independently.
std::vector<size_t> documented_sample(size_t n, size_t k, uint64_t seed) {
  std::vector<size_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = i;
  std::mt19937_64 g(seed);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t m = n - i;
    const uint64_t limit = m * (UINT64_MAX / m);
    uint64_t x = g();
    while (x >= limit) x = g();
    std::swap(a[i], a[i + x % m]);
  }
  a.resize(k);
  std::sort(a.begin(), a.end());
  return a;
}

TEST(EvalData, SampleIsTheDocumentedDeterministicDraw) {
  const auto s = sample_indices(3083, 300, 0);
  ASSERT_EQ(s.size(), 300u);
  EXPECT_EQ(s, documented_sample(3083, 300, 0));
  EXPECT_EQ(std::set<size_t>(s.begin(), s.end()).size(), 300u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_LT(s.back(), 3083u);
  EXPECT_NE(s, sample_indices(3083, 300, 1));
  EXPECT_EQ(sample_indices(5, 9, 7), (std::vector<size_t>{0, 1, 2, 3, 4}));
  // Every index is about equally likely: 2000 draws of 10 of 20, each index ~1000 times.
  std::vector<int> hits(20, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed)
    for (size_t i : sample_indices(20, 10, seed)) ++hits[i];
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
}

TEST(EvalCsv, ReadsRfc4180) {
  const CsvTable t = parse_csv(
      "\xEF\xBB\xBFtext,label\r\n"
      "\"Hello, \"\"world\"\"\",greeting\r\n"
      "\"two\nlines\",multi\n"
      " spaced ,x\n"
      ",empty\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"text", "label"}));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"Hello, \"world\"", "greeting"}));
  EXPECT_EQ(t.rows[1], (std::vector<std::string>{"two\nlines", "multi"}));
  EXPECT_EQ(t.rows[2], (std::vector<std::string>{" spaced ", "x"}));
  EXPECT_EQ(t.rows[3], (std::vector<std::string>{"", "empty"}));
}

TEST(EvalCsv, RefusesBrokenCsvNamingTheRecord) {
  try {
    parse_csv("a,b\n1,2\n\"open,3\n");
    FAIL() << "unterminated quote accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CSV record"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_csv("a,b\n1,x\"y\"z\n"), Error);
  EXPECT_THROW(parse_csv(""), Error);
}

TEST(EvalClassify, HumanizesLabelNames) {
  EXPECT_EQ(humanize_label("card_declined"), "Card declined");
  EXPECT_EQ(humanize_label("what_is_your_name"), "What is your name");
  EXPECT_EQ(humanize_label("__top_up__"), "Top up");
  EXPECT_EQ(humanize_label("Already Human"), "Already Human");
  EXPECT_EQ(humanize_label("oos"), "Oos");
}

TEST(EvalClassify, BuildsOneChoiceQuestionOver151Labels) {
  const std::string dir = stave::test::temp_dir() + "/eval_classify";
  std::filesystem::create_directories(dir);
  std::ofstream names(dir + "/labels.txt");
  for (int i = 0; i < 151; ++i) names << "intent_" << i << "_name\n";
  names.close();
  std::ofstream in(dir + "/in.jsonl");
  in << R"({"text": "first", "label": 150})" << "\n"
     << R"({"text": "second", "label": "intent_7_name"})" << "\n"
     << R"({"text": "third", "label": 151})" << "\n"
     << R"({"label": 3})" << "\n";
  in.close();
  ClassifyOptions o;
  o.labels_from = dir + "/labels.txt";
  const auto rows = read_classify_rows(dir + "/in.jsonl", o);
  const auto labels = label_set(rows, o);
  ASSERT_EQ(labels.size(), 151u);
  const auto out = build_classify_records(rows, labels, o);
  ASSERT_EQ(out.lines.size(), 2u);
  ASSERT_EQ(out.problems.size(), 2u);
  EXPECT_EQ(out.problems[0].first, 3);
  EXPECT_NE(out.problems[0].second.find("\"151\""), std::string::npos);
  EXPECT_EQ(out.problems[1].first, 4);
  const LabelledRecord r = parse_labelled_line(out.lines[0], 1);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.request.questions.size(), 1u);
  EXPECT_EQ(r.request.questions[0].options.size(), 151u);
  EXPECT_EQ(r.labels[0].second, "intent_150_name");
  const auto j = nlohmann::ordered_json::parse(out.lines[1]);
  EXPECT_EQ(j["request"]["state"], "second");
  EXPECT_EQ(j["request"]["questions"]["label"]["criteria"]["intent_7_name"], "Intent 7 name");
  EXPECT_EQ(j["labels"]["label"], "intent_7_name");
}

TEST(EvalClassify, ReadsCsvWithLabelsFromTheData) {
  const std::string path = stave::test::temp_dir() + "/eval_classify.csv";
  std::ofstream(path) << "id,utterance,intent\n1,\"Where is my card, please?\",card_arrival\n2,refund me,refund\n"
                      << "3,short row\n4,again,card_arrival\n";
  ClassifyOptions o;
  o.text_field = "utterance";
  o.label_field = "intent";
  const auto rows = read_classify_rows(path, o);
  const auto labels = label_set(rows, o);
  EXPECT_EQ(labels, (std::vector<std::string>{"card_arrival", "refund"}));
  const auto out = build_classify_records(rows, labels, o);
  EXPECT_EQ(out.lines.size(), 3u);
  ASSERT_EQ(out.problems.size(), 1u);
  EXPECT_EQ(out.problems[0].first, 3);
  EXPECT_EQ(nlohmann::json::parse(out.lines[0])["request"]["state"], "Where is my card, please?");
  o.text_field = "missing";
  EXPECT_THROW(read_classify_rows(path, o), Error);
}

TEST(EvalMetrics, KlFromLogits) {
  // softmax([0, ln 3]) = (1/4, 3/4); softmax([0, 0]) = (1/2, 1/2).
  const double expected = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  EXPECT_NEAR(kl_from_logits({0.f, static_cast<float>(std::log(3.0))}, {0.f, 0.f}), expected, 1e-7);
  EXPECT_EQ(kl_from_logits({1.f, 2.f, 3.f}, {1.f, 2.f, 3.f}), 0.0);
  // The second distribution's p(option 2) = e^-200 underflows in fp32; the KL stays finite:
  // ½·(ln ½ − 0) + ½·(ln ½ + 200) = 100 − ln 2.
  EXPECT_NEAR(kl_from_logits({0.f, 0.f}, {200.f, 0.f}), 100.0 - std::log(2.0), 1e-9);
}

RecordResult result(int64_t line, std::string top_m, std::string top_a, std::optional<std::string> label, double kl,
                    double dp) {
  RecordResult r;
  r.line = line;
  r.key = std::to_string(line) + ":x";
  QuestionResult q;
  q.id = "q";
  q.type = "choice";
  q.option_ids = {"a", "b"};
  q.p_model = top_m == "a" ? std::vector<double>{0.7, 0.3} : std::vector<double>{0.3, 0.7};
  q.p_against = top_a == "a" ? std::vector<double>{0.6, 0.4} : std::vector<double>{0.4, 0.6};
  q.top_model = top_m;
  q.top_against = top_a;
  q.label = label;
  q.kl = kl;
  q.max_abs_dp = dp;
  r.questions.push_back(q);
  return r;
}

TEST(EvalMetrics, SummaryCountsLabelledQuestionsAndAgreement) {
  std::vector<RecordResult> rs{result(1, "a", "a", "a", 0.1, 0.1), result(2, "b", "a", "a", 0.3, 0.3),
                               result(3, "b", "b", std::nullopt, 0.2, 0.1)};
  RecordResult bad;
  bad.line = 4;
  bad.error = "broken";
  rs.push_back(bad);
  const EvalSummary s = summarize_records(rs, true);
  EXPECT_EQ(s.records, 3);
  EXPECT_EQ(s.bad_records, 1);
  EXPECT_EQ(s.questions, 3);
  EXPECT_EQ(s.labelled, 2);
  EXPECT_DOUBLE_EQ(*s.model_accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(*s.against_accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(s.top1_agreement(), 2.0 / 3.0);
  EXPECT_NEAR(s.mean_kl(), 0.2, 1e-15);
  EXPECT_DOUBLE_EQ(s.max_abs_dp, 0.3);
  const auto j = nlohmann::json::parse(summary_json(s));
  EXPECT_EQ(j["records"], 3);
  EXPECT_EQ(j["questions"], 3);
  EXPECT_DOUBLE_EQ(j["model"]["accuracy"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["against"]["accuracy"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["top1_agreement"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["max_abs_dp"].get<double>(), 0.3);
  EXPECT_TRUE(j.contains("mean_kl"));
  const auto alone = nlohmann::json::parse(summary_json(summarize_records(rs, false)));
  EXPECT_FALSE(alone.contains("against"));
  EXPECT_FALSE(alone.contains("mean_kl"));
  EXPECT_DOUBLE_EQ(alone["model"]["accuracy"].get<double>(), 0.5);
}

TEST(EvalResults, LogRoundTripsAndResumes) {
  const std::string path = stave::test::temp_dir() + "/eval_results.jsonl";
  std::filesystem::remove(path);
  const std::string run = R"({"model":"m","against":"b"})";
  const RecordResult a = result(1, "a", "b", "a", 0.125, 0.3);
  {
    ResultsLog log(path, run);
    EXPECT_EQ(log.resumed(), 0u);
    log.append(a);
  }
  std::ofstream(path, std::ios::app) << R"({"line":2,"key":"2:x","questi)";  // killed mid-write
  {
    ResultsLog log(path, run);
    EXPECT_EQ(log.resumed(), 1u);
    const RecordResult* back = log.find(a.key);
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(record_result_line(*back), record_result_line(a));
    EXPECT_EQ(back->questions[0].kl, 0.125);
    EXPECT_EQ(log.find("2:x"), nullptr);
    RecordResult bad;
    bad.line = 2;
    bad.key = "2:x";
    bad.error = "refused";
    log.append(bad);
  }
  {
    ResultsLog log(path, run);
    EXPECT_EQ(log.resumed(), 2u);
    ASSERT_NE(log.find("2:x"), nullptr);
    EXPECT_EQ(log.find("2:x")->error, "refused");
  }
  EXPECT_THROW(ResultsLog(path, R"({"model":"other"})"), Error);
}

}  // namespace
}  // namespace stave::eval
