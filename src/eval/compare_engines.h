// `stave eval`: how far one model's decisions are from another's on the same requests — e.g. a
// quantized release against its BF16 source (with and without AWQ), or fast precision against
// exact. Per request: the largest |Δp| over every option of every question, the mean |Δlogit|,
// and whether each question's top option agrees.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "stave/engine.h"

namespace stave::eval {

struct RequestComparison {
  std::string name;            // file name or "FILE:LINE"
  bool error = false;          // either engine refused the request (both must, with the same kind)
  std::string error_message;   // the candidate's message, when it refused
  bool errors_agree = true;
  int64_t questions = 0, top_agreements = 0;
  double max_abs_dp = 0, mean_abs_dlogit = 0, max_abs_dlogit = 0;
};

struct ComparisonSummary {
  int64_t requests = 0, answered = 0, refused = 0, error_disagreements = 0;
  int64_t questions = 0, top_agreements = 0;
  double max_abs_dp = 0, mean_max_abs_dp = 0, mean_abs_dlogit = 0, max_abs_dlogit = 0;
};

struct NamedRequest {
  std::string name;
  std::string json;
};

// Requests from paths: a .json file, a .jsonl file (one request per line), or a folder whose
// entries are such files or case folders holding request.json (the fixtures' layout), taken in
// name order. Throws stave::Error naming a path that is none of these.
std::vector<NamedRequest> load_requests(const std::vector<std::string>& paths);

RequestComparison compare_request(const Engine& candidate, const Engine& baseline, const NamedRequest& request,
                                  const DecideOptions& options);

ComparisonSummary summarize(const std::vector<RequestComparison>& rows);

}  // namespace stave::eval
