// stave eval-data classify: a plain classification dataset (JSONL or CSV) as labelled decision
// data for `stave eval --data` (one choice question per record over the label set).
#include <cstdio>
#include <iostream>

#include "command.h"
#include "eval/classify_adapter.h"

namespace stave::cli {
namespace {

struct ClassifyArgs {
  eval::ClassifyOptions options;
  std::string input;
};

int run_classify(const ClassifyArgs& a) {
  const auto rows = eval::read_classify_rows(a.input, a.options);
  const auto labels = eval::label_set(rows, a.options);
  const auto out = eval::build_classify_records(rows, labels, a.options);
  for (const auto& [number, message] : out.problems)
    std::fprintf(stderr, "%s %lld: %s\n", a.input.size() > 4 && a.input.substr(a.input.size() - 4) == ".csv" ? "record" : "line",
                 static_cast<long long>(number), message.c_str());
  for (const auto& line : out.lines) std::cout << line << "\n";
  std::cout.flush();
  std::fprintf(stderr, "eval-data: %zu records, %zu labels, %zu skipped\n", out.lines.size(), out.label_count,
               out.problems.size());
  return out.lines.empty() ? 1 : 0;
}

Register reg{{"eval-data", "Turn a plain dataset into labelled decision data for stave eval --data",
              [](CLI::App& sub) {
                auto a = std::make_shared<ClassifyArgs>();
                sub.require_subcommand(1);
                CLI::App* c = sub.add_subcommand(
                    "classify", "one choice question per record; options = the label set, described by humanized names");
                c->add_option("--text-field", a->options.text_field, "the field (column) holding the text")
                    ->capture_default_str();
                c->add_option("--label-field", a->options.label_field, "the field (column) holding the label")
                    ->capture_default_str();
                c->add_option("--labels-from", a->options.labels_from,
                              "data (the distinct labels, sorted) or a file of label names, one per line in id order")
                    ->capture_default_str();
                c->add_option("--instructions", a->options.instructions, "the question's instructions")
                    ->capture_default_str();
                c->add_option("--question-id", a->options.question_id, "the question's id")->capture_default_str();
                c->add_option("--model-name", a->options.model_name, "the requests' model field")->capture_default_str();
                c->add_option("input", a->input, "IN.jsonl or IN.csv (header row names the columns)")->required();
                return std::function<int()>([a]() { return run_classify(*a); });
              },
              76}};

}  // namespace
}  // namespace stave::cli
