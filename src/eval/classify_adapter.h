// `stave eval-data classify`: a plain classification dataset (JSONL or CSV with a text and a
// label column) turned into labelled decision data (eval/labelled_data.h), one choice question
// per record whose options are the label set, each described by its humanized name
// ("card_declined" -> "Card declined"), as the Clef card evaluates BANKING77 and CLINC150.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stave::eval {

struct ClassifyOptions {
  std::string text_field = "text";
  std::string label_field = "label";
  // "data": the distinct labels of the input, sorted by code point; otherwise a file with one
  // label name per line, in label-id order (integer labels are indices into it).
  std::string labels_from = "data";
  std::string instructions = "Which category does this text belong to?";
  std::string question_id = "label";
  std::string model_name = "clef";
};

// One input record with its text and label as strings (or why it has none).
struct ClassifyRow {
  int64_t number = 0;       // JSONL: line number; CSV: data record number (header = record 0)
  std::string text, label;
  bool label_is_index = false;  // an integer label (JSON integer or CSV digits)
  std::string error;
};

struct ClassifyOutput {
  std::vector<std::string> lines;                          // labelled JSONL lines, no newline
  std::vector<std::pair<int64_t, std::string>> problems;   // (record number, message) per skipped record
  size_t label_count = 0;
};

// "card_declined" -> "Card declined": underscores to spaces, runs of spaces collapsed, the first
// letter upper-cased (ASCII), the rest kept.
std::string humanize_label(const std::string& name);

// Rows of a .csv (by extension, case-insensitive) or JSONL file. Throws stave::Error when the
// file cannot be read or the CSV has no column of the given names.
std::vector<ClassifyRow> read_classify_rows(const std::string& path, const ClassifyOptions& options);

// The label names: from the rows ("data") or from the options' file.
std::vector<std::string> label_set(const std::vector<ClassifyRow>& rows, const ClassifyOptions& options);

ClassifyOutput build_classify_records(const std::vector<ClassifyRow>& rows, const std::vector<std::string>& labels,
                                      const ClassifyOptions& options);

}  // namespace stave::eval
