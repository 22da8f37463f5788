// Structured access log: one JSON object per request on one line, so log shippers need no
// parsing rules. Written with a lock so concurrent lines never interleave.
#pragma once
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace stave::server {

struct AccessRecord {
  std::string request_id;
  std::string method;
  std::string path;
  std::string remote;
  int status = 0;
  double latency_ms = 0;
  size_t bytes_in = 0;
  size_t bytes_out = 0;
  std::string model;        // the request's "model" (systemone only)
  int64_t input_tokens = -1;  // answered decisions only
  std::string error_type;   // "" for success
};

class AccessLog {
 public:
  // `request_lines` false (stave serve --quiet): events still print, request lines do not.
  explicit AccessLog(std::FILE* out, bool request_lines = true) : out_(out), request_lines_(request_lines) {}
  void write(const AccessRecord& r);
  static std::string to_json_line(const AccessRecord& r);  // without the newline
  // A server event (listening, loaded, draining, stopped) as one JSON line: {"ts", "event", ...}.
  void event(const std::string& name, const std::vector<std::pair<std::string, std::string>>& fields = {});

 private:
  std::FILE* out_;
  bool request_lines_;
  std::mutex mutex_;
};

}  // namespace stave::server
