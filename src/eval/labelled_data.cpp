#include "eval/labelled_data.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

#include "stave/errors.h"
#include "text/json_value.h"
#include "util/sha256.h"

namespace stave::eval {

namespace {

constexpr size_t kStateExcerptChars = 240;

std::string excerpt(const JsonValue& state) {
  std::string s = state.is_string() ? state.as_string() : std::string("(structured state)");
  if (s.size() <= kStateExcerptChars) return s;
  size_t cut = kStateExcerptChars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return s.substr(0, cut) + "…";
}

// Every label names a question of the request and one of that question's options.
std::string check_labels(const DecisionRequest& request, const std::vector<std::pair<std::string, std::string>>& labels) {
  for (const auto& label : labels) {
    const std::string& qid = label.first;  // plain references: clang 14 (the fuzz build) cannot
    const std::string& option = label.second;  // capture structured bindings in lambdas
    auto q = std::find_if(request.questions.begin(), request.questions.end(),
                          [&](const QuestionSpec& s) { return s.id == qid; });
    if (q == request.questions.end()) return "label for question \"" + qid + "\", which the request does not ask";
    auto o = std::find_if(q->options.begin(), q->options.end(), [&](const OptionSpec& s) { return s.id == option; });
    if (o == q->options.end())
      return "label \"" + option + "\" of question \"" + qid + "\" is none of its options";
  }
  return {};
}

}  // namespace

std::string record_key(const std::string& text, int64_t line) {
  return std::to_string(line) + ":" + sha256_hex(text.data(), text.size()).substr(0, 16);
}

LabelledRecord parse_labelled_line(const std::string& text, int64_t line) {
  LabelledRecord r;
  r.line = line;
  r.key = record_key(text, line);
  try {
    const JsonValue doc = parse_json(text);
    if (!doc.is_object()) throw Error(ErrorKind::kInvalidRequest, "a record must be a JSON object");
    const JsonValue* request = doc.find("request");
    if (!request) throw Error(ErrorKind::kInvalidRequest, "a record needs a \"request\" member");
    if (const JsonValue* labels = doc.find("labels"); labels && !labels->is_null()) {
      if (!labels->is_object())
        throw Error(ErrorKind::kInvalidRequest, "\"labels\" must be an object {question id: option id}");
      for (const auto& [qid, v] : labels->members()) {
        if (v.is_string()) r.labels.emplace_back(qid, v.as_string());
        else if (v.kind() == JsonValue::Kind::kBool) r.labels.emplace_back(qid, v.as_bool() ? "true" : "false");
        else if (v.kind() == JsonValue::Kind::kInteger) r.labels.emplace_back(qid, v.as_string());
        else throw Error(ErrorKind::kInvalidRequest, "label of question \"" + qid + "\" must be an option id string");
      }
    }
    r.request = parse_decision_request(*request);
    r.state_excerpt = excerpt(r.request.state);
    r.error = check_labels(r.request, r.labels);
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<LabelledRecord> read_labelled_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kInvalidRequest, "cannot read the data file \"" + path + "\"");
  std::vector<LabelledRecord> out;
  std::string text;
  int64_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    out.push_back(parse_labelled_line(text, line));
  }
  return out;
}

std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (k >= n) return idx;
  std::mt19937_64 gen(seed);
  auto uniform = [&](uint64_t m) {
    const uint64_t limit = m * ((~uint64_t{0}) / m);  // largest multiple of m that fits: no bias
    uint64_t x;
    do x = gen(); while (x >= limit);
    return x % m;
  };
  for (size_t i = 0; i < k; ++i) std::swap(idx[i], idx[i + uniform(n - i)]);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace stave::eval
