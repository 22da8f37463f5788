// Labelled decision data for `stave eval --data`: a JSONL file whose lines are
//   {"request": <SystemOne request>, "labels": {"<question id>": "<option id>", ...}}
// (labels may name any subset of the request's questions, or none). Lines are read once; a line
// that is not such an object is kept as a record with an error, so a run reports it and goes on.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "decide/request.h"

namespace stave::eval {

struct LabelledRecord {
  int64_t line = 0;          // 1-based line number in the file
  std::string key;           // "LINE:HASH" (first 16 hex digits of the line's SHA-256): the resume key
  std::string error;         // non-empty: the line is not a valid record (the message says why)
  DecisionRequest request;   // parsed and checked (valid when error is empty)
  std::vector<std::pair<std::string, std::string>> labels;  // question id -> option id, file order
  std::string state_excerpt; // the request's state, shortened for reports
};

// Every non-blank line of `path` as a record, in file order. Throws stave::Error only when the
// file cannot be read; a bad line becomes a record with `error` set.
std::vector<LabelledRecord> read_labelled_jsonl(const std::string& path);

// One line parsed (exposed for tests): a record with `error` set when it is not valid, including
// labels that name a question the request lacks or an option that question does not have.
LabelledRecord parse_labelled_line(const std::string& text, int64_t line);

// The resume key of a line: "LINE:" + the first 16 hex digits of SHA-256(text).
std::string record_key(const std::string& text, int64_t line);

// A deterministic sample of k of n indices (k >= n: all of them), returned in ascending order:
// a partial Fisher–Yates shuffle of 0..n-1 driven by std::mt19937_64 seeded with `seed`; step i
// (i = 0..k-1) swaps position i with i + uniform(n - i), where uniform(m) draws 64-bit x from
// the generator until x < m·⌊(2^64 − 1)/m⌋ and returns x mod m (no modulo bias). The same
// (n, k, seed) gives the same sample on every platform. Not Python's random.sample.
std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed);

}  // namespace stave::eval
