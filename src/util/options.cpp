#include "stave/options.h"

namespace stave {

const char* to_string(Precision p) { return p == Precision::kExact ? "exact" : "fast"; }

const char* to_string(ConfidenceMode m) {
  switch (m) {
    case ConfidenceMode::kReference: return "reference";
    case ConfidenceMode::kWorkersAi: return "workers-ai";
    case ConfidenceMode::kJev: return "jev";
  }
  return "reference";
}

std::optional<Precision> parse_precision(const std::string& s) {
  if (s == "exact") return Precision::kExact;
  if (s == "fast") return Precision::kFast;
  return std::nullopt;
}

std::optional<ConfidenceMode> parse_confidence_mode(const std::string& s) {
  if (s == "reference" || s == "max") return ConfidenceMode::kReference;
  if (s == "workers-ai") return ConfidenceMode::kWorkersAi;
  if (s == "jev") return ConfidenceMode::kJev;
  return std::nullopt;
}

}  // namespace stave
