// The loop of `stave eval --data`: decide every (sampled) record with the model and the baseline,
// score it, append it to the resumable output, report bad records per line and progress on
// stderr (records/s, ETA) without stopping.
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "eval/label_scoring.h"
#include "eval/labelled_data.h"
#include "stave/engine.h"

namespace stave::eval {

struct LabelledRunOptions {
  DecideOptions decide;
  std::optional<size_t> sample;   // evaluate sample_indices(records, *sample, seed) only
  uint64_t seed = 0;
  std::string out_path;           // resumable per-record output (empty: none)
  std::string run_header;         // JSON object text naming the run (the output's first line)
  std::FILE* log = stderr;        // bad records and progress (nullptr: silent)
};

std::vector<RecordResult> run_labelled(const Engine& model, const Engine* against,
                                       const std::vector<LabelledRecord>& records, const LabelledRunOptions& options);

}  // namespace stave::eval
