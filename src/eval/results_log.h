// The resumable per-record output of `stave eval --data --out results.jsonl`: a header line
// naming the run ({"stave_eval": {...}}), then one line per finished record, appended and flushed
// as each finishes. Reopening the file for the same run reads the records already done (keyed by
// line number + hash of the line, LabelledRecord::key) so a restarted run skips them; a partial
// last line (a run killed mid-write) is cut off. A file written for another run is refused.
#pragma once
#include <fstream>
#include <map>
#include <string>

#include "eval/label_scoring.h"

namespace stave::eval {

std::string record_result_line(const RecordResult& r);       // one JSON line, no newline
RecordResult parse_record_result_line(const std::string& line);  // throws stave::Error naming what is wrong

class ResultsLog {
 public:
  // `run` is a JSON object text describing the run (models, precisions, data); an existing file
  // must start with the same header.
  ResultsLog(const std::string& path, const std::string& run);
  const RecordResult* find(const std::string& key) const;
  size_t resumed() const { return done_.size(); }
  void append(const RecordResult& r);

 private:
  std::string path_;
  std::map<std::string, RecordResult> done_;
  std::ofstream out_;
};

}  // namespace stave::eval
