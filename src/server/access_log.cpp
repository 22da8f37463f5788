#include "server/access_log.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace stave::server {
namespace {

std::string utc_now_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
}

}  // namespace

std::string AccessLog::to_json_line(const AccessRecord& r) {
  nlohmann::ordered_json j;
  j["ts"] = utc_now_iso8601();
  j["request_id"] = r.request_id;
  j["method"] = r.method;
  j["path"] = r.path;
  j["status"] = r.status;
  j["latency_ms"] = static_cast<double>(static_cast<int64_t>(r.latency_ms * 1000.0 + 0.5)) / 1000.0;
  j["bytes_in"] = r.bytes_in;
  j["bytes_out"] = r.bytes_out;
  j["remote"] = r.remote;
  if (!r.model.empty()) j["model"] = r.model;
  if (r.input_tokens >= 0) j["input_tokens"] = r.input_tokens;
  if (!r.error_type.empty()) j["error"] = r.error_type;
  // Paths and model names come from clients: invalid UTF-8 is replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AccessLog::write(const AccessRecord& r) {
  if (!out_ || !request_lines_) return;
  const std::string line = to_json_line(r) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void AccessLog::event(const std::string& name, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (!out_) return;
  nlohmann::ordered_json j;
  j["ts"] = utc_now_iso8601();
  j["event"] = name;
  for (const auto& [k, v] : fields) j[k] = v;
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace stave::server
