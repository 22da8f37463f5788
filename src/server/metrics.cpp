#include "server/metrics.h"

#include <fmt/format.h>

namespace stave::server {
namespace {

std::string le_label(double b) { return fmt::format("{}", b); }

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, le_label(bounds_[i]), cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  out += fmt::format("{}_sum {}\n", name, sum_);
  out += fmt::format("{}_count {}\n", name, count_);
}

Metrics::Metrics()
    : latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      prefill_tps_({100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000}) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::observe_decision(int64_t input_tokens, double latency_s, double compute_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  input_tokens_ += static_cast<uint64_t>(input_tokens);
  ++decisions_;
  latency_.observe(latency_s);
  if (compute_s > 0) prefill_tps_.observe(static_cast<double>(input_tokens) / compute_s);
}

void Metrics::count_refused(const std::string& limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_[limit];
}

void Metrics::count_cancelled(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cancelled_[reason];
}

std::string Metrics::render(const GaugeSample& g) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mutex_);
  out += "# HELP stave_requests_total HTTP requests answered, by endpoint and status code.\n";
  out += "# TYPE stave_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("stave_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  out += "# HELP stave_queue_depth Decisions waiting for a worker.\n# TYPE stave_queue_depth gauge\n";
  out += fmt::format("stave_queue_depth {}\n", g.queue_depth);
  out += "# HELP stave_queue_capacity Decisions that may wait before requests are refused with 503.\n";
  out += "# TYPE stave_queue_capacity gauge\n";
  out += fmt::format("stave_queue_capacity {}\n", g.queue_capacity);
  out += "# HELP stave_requests_running Decisions being computed.\n# TYPE stave_requests_running gauge\n";
  out += fmt::format("stave_requests_running {}\n", g.running);
  out += "# HELP stave_workers Decisions computed at once.\n# TYPE stave_workers gauge\n";
  out += fmt::format("stave_workers {}\n", g.workers);
  out += "# HELP stave_model_loaded 1 once the model is loaded and requests are answered.\n";
  out += "# TYPE stave_model_loaded gauge\n";
  out += fmt::format("stave_model_loaded {}\n", g.loaded ? 1 : 0);
  out += "# HELP stave_open_connections HTTP connections open.\n# TYPE stave_open_connections gauge\n";
  out += fmt::format("stave_open_connections {}\n", g.open_connections);
  out += "# HELP stave_connections_waiting Requests read whole whose reply is not yet written.\n";
  out += "# TYPE stave_connections_waiting gauge\n";
  out += fmt::format("stave_connections_waiting {}\n", g.waiting);
  out += "# HELP stave_bytes_in_flight Request bytes held by the server (bodies not yet answered).\n";
  out += "# TYPE stave_bytes_in_flight gauge\n";
  out += fmt::format("stave_bytes_in_flight {}\n", g.bytes_in_flight);
  out += "# HELP stave_http_refused_total Requests and connections refused, by the limit they broke.\n";
  out += "# TYPE stave_http_refused_total counter\n";
  for (const auto& [limit, n] : refused_) out += fmt::format("stave_http_refused_total{{limit=\"{}\"}} {}\n", limit, n);
  out += "# HELP stave_decisions_cancelled_total Decisions stopped before their end, by reason.\n";
  out += "# TYPE stave_decisions_cancelled_total counter\n";
  for (const auto& [reason, n] : cancelled_)
    out += fmt::format("stave_decisions_cancelled_total{{reason=\"{}\"}} {}\n", reason, n);
  out += "# HELP stave_decisions_total Decisions answered (200).\n# TYPE stave_decisions_total counter\n";
  out += fmt::format("stave_decisions_total {}\n", decisions_);
  out += "# HELP stave_input_tokens_total Input tokens read by answered decisions (media included).\n";
  out += "# TYPE stave_input_tokens_total counter\n";
  out += fmt::format("stave_input_tokens_total {}\n", input_tokens_);
  out += "# HELP stave_request_latency_seconds Arrival to answer of answered decisions, queue wait included.\n";
  out += "# TYPE stave_request_latency_seconds histogram\n";
  latency_.render(out, "stave_request_latency_seconds");
  out += "# HELP stave_prefill_tokens_per_second Input tokens per second of decision compute.\n";
  out += "# TYPE stave_prefill_tokens_per_second histogram\n";
  prefill_tps_.render(out, "stave_prefill_tokens_per_second");
  return out;
}

}  // namespace stave::server
