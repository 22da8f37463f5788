// Prometheus text-format metrics (exposition format 0.0.4) for routers and dashboards: requests
// by endpoint and status, queue depth, running decisions, input tokens, latency and prefill
// throughput histograms, and the HTTP transport: open connections, requests waiting for their
// reply, request bytes held, refusals per limit, cancelled decisions. Counters only go up;
// gauges are sampled when /metrics is read.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace stave::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // "<name>_bucket{le=...} n", "_sum", "_count" lines.
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct GaugeSample {
  int64_t queue_depth = 0;      // decisions waiting for a worker
  int64_t running = 0;          // decisions being computed
  int64_t queue_capacity = 0;   // waiting room size
  int64_t workers = 0;          // decisions that run at once
  bool loaded = false;
  // The HTTP transport (server/http_server.h).
  int64_t open_connections = 0;
  int64_t waiting = 0;          // requests read whole, reply not yet written
  int64_t bytes_in_flight = 0;  // request bytes held
};

class Metrics {
 public:
  Metrics();
  // `endpoint` is a route path ("/v1/systemone") or "other" (unknown paths would otherwise
  // make unbounded label sets).
  void count_request(const std::string& endpoint, int status);
  void observe_decision(int64_t input_tokens, double latency_s, double compute_s);
  // A request or connection refused by a limit (`limit`: server/http_limits.h to_string).
  void count_refused(const std::string& limit);
  // A decision stopped before its end: "client_gone" or "deadline".
  void count_cancelled(const std::string& reason);
  std::string render(const GaugeSample& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> refused_;
  std::map<std::string, uint64_t> cancelled_;
  uint64_t input_tokens_ = 0;
  uint64_t decisions_ = 0;
  Histogram latency_;      // seconds, arrival to answer (queue wait included)
  Histogram prefill_tps_;  // input tokens per second of decision compute
};

}  // namespace stave::server
