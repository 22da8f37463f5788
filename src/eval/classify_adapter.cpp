#include "eval/classify_adapter.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "io/csv_reader.h"
#include "stave/errors.h"

namespace stave::eval {

namespace {

using Json = nlohmann::ordered_json;

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool is_csv(const std::string& path) {
  if (path.size() < 4) return false;
  std::string ext = path.substr(path.size() - 4);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".csv";
}

size_t column(const CsvTable& t, const std::string& name, const std::string& path) {
  auto it = std::find(t.header.begin(), t.header.end(), name);
  if (it == t.header.end())
    throw Error(ErrorKind::kInvalidRequest, "CSV file \"" + path + "\" has no column \"" + name + "\"");
  return static_cast<size_t>(it - t.header.begin());
}

std::vector<ClassifyRow> csv_rows(const std::string& path, const ClassifyOptions& o) {
  const CsvTable t = read_csv_file(path);
  const size_t tc = column(t, o.text_field, path), lc = column(t, o.label_field, path);
  std::vector<ClassifyRow> rows;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    ClassifyRow r;
    r.number = static_cast<int64_t>(i + 1);
    const auto& f = t.rows[i];
    if (f.size() != t.header.size()) {
      r.error = "has " + std::to_string(f.size()) + " fields, the header " + std::to_string(t.header.size());
    } else {
      r.text = f[tc];
      r.label = f[lc];
      r.label_is_index = all_digits(r.label);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

ClassifyRow jsonl_row(const std::string& line, int64_t number, const ClassifyOptions& o) {
  ClassifyRow r;
  r.number = number;
  try {
    const Json j = Json::parse(line);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    if (!j.contains(o.text_field) || !j[o.text_field].is_string())
      throw std::runtime_error("no string field \"" + o.text_field + "\"");
    r.text = j[o.text_field].get<std::string>();
    if (!j.contains(o.label_field)) throw std::runtime_error("no field \"" + o.label_field + "\"");
    const Json& l = j[o.label_field];
    if (l.is_string()) {
      r.label = l.get<std::string>();
    } else if (l.is_number_unsigned()) {
      r.label = std::to_string(l.get<uint64_t>());
      r.label_is_index = true;
    } else {
      throw std::runtime_error("field \"" + o.label_field + "\" is neither a string nor a non-negative integer");
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::vector<ClassifyRow> jsonl_rows(const std::string& path, const ClassifyOptions& o) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read \"" + path + "\"");
  std::vector<ClassifyRow> rows;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    rows.push_back(jsonl_row(line, n, o));
  }
  return rows;
}

}  // namespace

std::string humanize_label(const std::string& name) {
  std::string out;
  for (char c : name) {
    const char d = (c == '_') ? ' ' : c;
    if (d == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += d;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::vector<ClassifyRow> read_classify_rows(const std::string& path, const ClassifyOptions& options) {
  return is_csv(path) ? csv_rows(path, options) : jsonl_rows(path, options);
}

std::vector<std::string> label_set(const std::vector<ClassifyRow>& rows, const ClassifyOptions& options) {
  std::vector<std::string> labels;
  if (options.labels_from == "data") {
    std::set<std::string> seen;
    for (const auto& r : rows)
      if (r.error.empty()) seen.insert(r.label);
    labels.assign(seen.begin(), seen.end());
  } else {
    std::ifstream in(options.labels_from, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, "cannot read --labels-from \"" + options.labels_from + "\"");
    std::string line;
    std::set<std::string> seen;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      if (!seen.insert(line).second)
        throw Error(ErrorKind::kInvalidRequest, "--labels-from lists \"" + line + "\" twice");
      labels.push_back(line);
    }
  }
  if (labels.size() < 2)
    throw Error(ErrorKind::kInvalidRequest, "a choice needs at least 2 labels, the label set has " +
                                                std::to_string(labels.size()));
  return labels;
}

ClassifyOutput build_classify_records(const std::vector<ClassifyRow>& rows, const std::vector<std::string>& labels,
                                      const ClassifyOptions& options) {
  ClassifyOutput out;
  out.label_count = labels.size();
  const bool from_file = options.labels_from != "data";
  std::map<std::string, size_t> index;
  Json criteria = Json::object();
  for (size_t i = 0; i < labels.size(); ++i) {
    index[labels[i]] = i;
    criteria[labels[i]] = humanize_label(labels[i]);
  }
  Json question = {{"type", "choice"}, {"instructions", options.instructions}, {"criteria", criteria}};
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      out.problems.emplace_back(r.number, r.error);
      continue;
    }
    std::string label;
    if (index.count(r.label)) {
      label = r.label;
    } else if (from_file && r.label_is_index && std::stoull(r.label) < labels.size()) {
      label = labels[std::stoull(r.label)];
    } else {
      out.problems.emplace_back(r.number, "label \"" + r.label + "\" is not in the label set");
      continue;
    }
    Json request = {{"model", options.model_name}, {"state", r.text}, {"questions", {{options.question_id, question}}}};
    Json line = {{"request", std::move(request)}, {"labels", {{options.question_id, label}}}};
    try {
      out.lines.push_back(line.dump(-1, ' ', false, Json::error_handler_t::strict));
    } catch (const nlohmann::json::exception&) {
      out.problems.emplace_back(r.number, "text or label is not valid UTF-8");
    }
  }
  return out;
}

}  // namespace stave::eval
