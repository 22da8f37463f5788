#include "eval/results_log.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "stave/errors.h"

namespace stave::eval {

namespace {

using Json = nlohmann::ordered_json;

Error bad(const std::string& what) { return Error(ErrorKind::kInvalidRequest, what); }

std::string header_line(const std::string& run) {
  Json j;
  j["stave_eval"] = Json::parse(run);
  return j.dump();
}

}  // namespace

std::string record_result_line(const RecordResult& r) {
  Json j;
  j["line"] = r.line;
  j["key"] = r.key;
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  j["state"] = r.state_excerpt;
  Json qs = Json::array();
  for (const auto& q : r.questions) {
    Json x;
    x["id"] = q.id;
    x["type"] = q.type;
    x["instructions"] = q.instructions;
    x["label"] = q.label ? Json(*q.label) : Json(nullptr);
    x["options"] = q.option_ids;
    x["p_model"] = q.p_model;
    x["top_model"] = q.top_model;
    if (!q.p_against.empty()) {
      x["p_against"] = q.p_against;
      x["top_against"] = q.top_against;
      x["kl"] = q.kl;
      x["max_abs_dp"] = q.max_abs_dp;
    }
    qs.push_back(std::move(x));
  }
  j["questions"] = std::move(qs);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

RecordResult parse_record_result_line(const std::string& line) {
  try {
    const Json j = Json::parse(line);
    RecordResult r;
    r.line = j.at("line").get<int64_t>();
    r.key = j.at("key").get<std::string>();
    if (j.contains("error")) {
      r.error = j.at("error").get<std::string>();
      return r;
    }
    r.state_excerpt = j.at("state").get<std::string>();
    for (const auto& x : j.at("questions")) {
      QuestionResult q;
      q.id = x.at("id").get<std::string>();
      q.type = x.at("type").get<std::string>();
      q.instructions = x.at("instructions").get<std::string>();
      if (!x.at("label").is_null()) q.label = x.at("label").get<std::string>();
      q.option_ids = x.at("options").get<std::vector<std::string>>();
      q.p_model = x.at("p_model").get<std::vector<double>>();
      q.top_model = x.at("top_model").get<std::string>();
      if (x.contains("p_against")) {
        q.p_against = x.at("p_against").get<std::vector<double>>();
        q.top_against = x.at("top_against").get<std::string>();
        q.kl = x.at("kl").get<double>();
        q.max_abs_dp = x.at("max_abs_dp").get<double>();
      }
      r.questions.push_back(std::move(q));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("not a result line: ") + e.what());
  }
}

ResultsLog::ResultsLog(const std::string& path, const std::string& run) : path_(path) {
  const std::string header = header_line(run);
  namespace fs = std::filesystem;
  bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
  if (!fresh) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const size_t complete = text.rfind('\n');
    if (complete == std::string::npos) {
      text.clear();  // not even the header was finished
    } else if (complete + 1 != text.size()) {
      text.resize(complete + 1);  // a run killed mid-line: drop the partial record
      fs::resize_file(path, text.size());
    }
    std::istringstream lines(text);
    std::string line;
    int64_t n = 0;
    while (std::getline(lines, line)) {
      ++n;
      if (n == 1) {
        if (line != header)
          throw bad("--out " + path + " holds the results of another run (" + line.substr(0, 200) +
                    "); use a new file for this one");
        continue;
      }
      try {
        RecordResult r = parse_record_result_line(line);
        done_[r.key] = std::move(r);
      } catch (const Error& e) {
        throw bad("--out " + path + " line " + std::to_string(n) + ": " + e.what());
      }
    }
    fresh = text.empty();
    if (fresh) fs::resize_file(path, 0);
  }
  out_.open(path, std::ios::binary | std::ios::app);
  if (!out_) throw bad("cannot write --out " + path);
  if (fresh) out_ << header << "\n" << std::flush;
}

const RecordResult* ResultsLog::find(const std::string& key) const {
  auto it = done_.find(key);
  return it == done_.end() ? nullptr : &it->second;
}

void ResultsLog::append(const RecordResult& r) {
  out_ << record_result_line(r) << "\n" << std::flush;
  if (!out_) throw Error(ErrorKind::kInternal, "writing --out " + path_ + " failed");
}

}  // namespace stave::eval
