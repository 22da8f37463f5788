// stave serve: the SystemOne HTTP server (src/server). This file only maps flags to
// ServeOptions and turns SIGTERM/SIGINT into a graceful stop.
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_cli.h"
#include "command.h"
#include "server/server.h"

namespace stave::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string precision = "fast";
  int threads = 0;
  std::string device = "cpu";
  double fp8_cache_gib = 0;
  int64_t batch_tokens = 0;
  bool verify = false;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;
  std::vector<std::string> aliases;
  bool no_default_aliases = false;
  int64_t max_length = 16384;
  std::string confidence = "reference";
  std::string truncate = "keep";
  bool strict = false;
  bool no_limits = false;
  size_t max_questions = 64, max_options = 255, max_score_levels = 10, max_id_length = 100;
  size_t max_body_bytes = size_t{12} << 20;
  size_t max_json_values = server::kMaxJsonValues;
  int max_running = 1, max_queue = 16, timeout_ms = 30000, http_threads = 2;
  int max_decode_batch = 32;
  server::HttpLimits http;
  std::string api_key;
  std::string api_key_file;
  bool envelope = false;
  bool quiet = false;
};

int run(const ServeArgs& a) {
  server::ServeOptions o;
  o.engine.model = a.model;
  auto p = parse_precision(a.precision);
  if (!p) return print_error_json("--precision must be exact or fast, not \"" + a.precision + "\"");
  o.engine.precision = *p;
  o.engine.threads = a.threads;
  o.engine.device = a.device;
  o.engine.fp8_cache_gib = a.fp8_cache_gib;
  o.engine.batch_tokens = a.batch_tokens;
  o.engine.verify_checksums = a.verify;
  o.host = a.host;
  o.port = a.port;
  o.model_name = a.model_name;
  o.aliases = a.aliases;
  o.default_aliases = !a.no_default_aliases;
  o.decide.max_length = a.max_length;
  auto c = parse_confidence_mode(a.confidence);
  if (!c) return print_error_json("--confidence must be reference, workers-ai or jev, not \"" + a.confidence + "\"");
  o.decide.confidence = *c;
  if (a.truncate != "keep" && a.truncate != "refuse")
    return print_error_json("--truncate must be keep or refuse, not \"" + a.truncate + "\"");
  o.decide.truncation = a.truncate == "refuse" ? TruncationPolicy::kRefuse : TruncationPolicy::kTruncate;
  if (a.no_limits) {
    o.limits = RequestLimits{};
  } else {
    o.limits.max_questions = a.max_questions;
    o.limits.max_choice_options = a.max_options;
    o.limits.max_score_levels = a.max_score_levels;
    o.limits.max_id_length = a.max_id_length;
  }
  if (a.strict) {
    o.limits.require_instructions = true;
    o.limits.reject_unknown_fields = true;
  }
  o.limits.json.max_bytes = a.max_body_bytes;
  o.limits.json.max_values = a.max_json_values;
  o.max_body_bytes = a.max_body_bytes;
  if (a.max_running < 1) return print_error_json("--max-running must be at least 1");
  if (a.max_queue < 0) return print_error_json("--max-queue must not be negative");
  if (a.timeout_ms < 1) return print_error_json("--timeout-ms must be positive");
  if (a.http.header_timeout_ms < 1 || a.http.body_timeout_ms < 1 || a.http.idle_timeout_ms < 1)
    return print_error_json("--header-timeout-ms, --body-timeout-ms and --idle-timeout-ms must be positive");
  if (a.http.header_bytes < 256) return print_error_json("--max-header-bytes must be at least 256");
  o.max_running = a.max_running;
  o.max_queue = a.max_queue;
  o.max_decode_batch = a.max_decode_batch;
  o.timeout_ms = a.timeout_ms;
  if (a.http_threads < 1) return print_error_json("--http-threads must be at least 1");
  o.http = a.http;
  o.http.io_threads = a.http_threads;
  o.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    // The key from a file, so it is not visible in `ps`: the first line, trailing blanks cut.
    std::ifstream f(a.api_key_file);
    std::string key;
    if (!f || !std::getline(f, key)) return print_error_json("--api-key-file: cannot read " + a.api_key_file);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) return print_error_json("--api-key-file: the first line of " + a.api_key_file + " is empty");
    if (!o.api_key.empty()) return print_error_json("give --api-key or --api-key-file, not both");
    o.api_key = key;
  }
  if (o.api_key.empty())
    if (const char* env = std::getenv("STAVE_API_KEY"); env) o.api_key = env;
  o.workers_ai_envelope = a.envelope;
  o.access_log = !a.quiet;

  // Signals go to one waiting thread, never to a worker: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // our own wake-up when the server stops for another reason
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::Server srv(o);
  srv.bind();  // a taken port fails now, before minutes of loading
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    srv.stop();
  });
  srv.load_in_background();
  srv.run();
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  const std::string err = srv.load_error();
  if (!err.empty()) return print_error_json(err);
  return 0;
}

Register reg{{"serve",
              "Serve SystemOne decisions and OpenAI-compatible generation over HTTP (POST /v1/systemone, "
              "/v1/chat/completions, /v1/completions, /v1/models, /health, /metrics)",
              [](CLI::App& sub) {
                auto a = std::make_shared<ServeArgs>();
                sub.add_option("--model", a->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--precision", a->precision, "exact or fast")->capture_default_str();
                sub.add_option("--threads", a->threads, "compute threads (default: all cores)")->check(in_range(0, 4096));
                sub.add_option("--device", a->device, "where the backbone runs: cpu, or cuda (builds with STAVE_CUDA)")
                    ->capture_default_str();
                bench_cli::add_fp8_cache(sub, a->fp8_cache_gib);
                sub.add_option("--batch-tokens", a->batch_tokens,
                               "cuda: pack requests that wait during a prefill into the next one, up to N tokens "
                               "(needs --max-running > 1; 0: off)")
                    ->capture_default_str()
                    ->check(in_range(0));
                sub.add_flag("--verify", a->verify, "check SHA256SUMS before loading");
                sub.add_option("--host", a->host, "address to bind (0.0.0.0 to listen on every interface)")
                    ->capture_default_str();
                sub.add_option("--port", a->port, "port (0: any free port)")->capture_default_str()->check(in_range(0, 65535));
                sub.add_option("--model-name", a->model_name, "the id /v1/models reports and requests may name");
                sub.add_option("--alias", a->aliases, "another accepted model name (repeatable)");
                sub.add_flag("--no-default-aliases", a->no_default_aliases, "do not accept \"clef\" as a name");
                sub.add_option("--max-length", a->max_length, "token budget per request (a decision's input; a generation's prompt + completion)")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--confidence", a->confidence, "reference (max p), workers-ai or jev")
                    ->capture_default_str();
                sub.add_option("--truncate", a->truncate,
                               "keep (cut the state as the reference, report usage.truncated_state_tokens) or "
                               "refuse (413 not_admitted)")
                    ->capture_default_str();
                sub.add_flag("--strict", a->strict, "require instructions and refuse unknown fields");
                sub.add_flag("--no-limits", a->no_limits, "only the reference's checks (no protocol limits)");
                sub.add_option("--max-questions", a->max_questions)->capture_default_str()->check(in_range(1));
                sub.add_option("--max-options", a->max_options, "choice options per question")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--max-score-levels", a->max_score_levels)->capture_default_str()->check(in_range(1));
                sub.add_option("--max-id-length", a->max_id_length, "code points")->capture_default_str()->check(in_range(1));
                sub.add_option("--max-body-bytes", a->max_body_bytes, "larger bodies get 413")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--max-running", a->max_running, "decisions computed at once")
                    ->capture_default_str()
                    ->check(in_range(1, 4096));
                sub.add_option("--max-queue", a->max_queue,
                               "decisions that may wait (then 503); generation requests have their own queue of this size")
                    ->capture_default_str()
                    ->check(in_range(0, std::numeric_limits<int>::max()));
                sub.add_option("--max-decode-batch", a->max_decode_batch,
                               "generation: requests admitted and decoded together in one step (continuous batching; "
                               "apart from --max-running; more wait up to --max-queue, then 503)")
                    ->capture_default_str()
                    ->check(in_range(1, 4096));
                sub.add_option("--timeout-ms", a->timeout_ms, "per request, queue wait included (then 504)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--max-json-values", a->max_json_values, "JSON values per body (then 413)")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--http-threads", a->http_threads, "event-loop threads (connections; not decisions)")
                    ->capture_default_str()
                    ->check(in_range(1, 256));
                sub.add_option("--max-connections", a->http.max_connections, "open connections (then 503 + close; 0: no limit)")
                    ->capture_default_str()
                    ->check(in_range(0, 1'000'000));
                sub.add_option("--max-connections-per-client", a->http.max_connections_per_address,
                               "open connections per client address (0: no limit; behind a proxy use 0)")
                    ->capture_default_str()
                    ->check(in_range(0, 1'000'000));
                sub.add_option("--max-header-bytes", a->http.header_bytes, "request line + headers (then 431)")
                    ->capture_default_str()
                    ->check(in_range(256, 1 << 24));
                sub.add_option("--header-timeout-ms", a->http.header_timeout_ms, "to receive a request's head (then 408)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--body-timeout-ms", a->http.body_timeout_ms, "to receive a request's body (then 408)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--idle-timeout-ms", a->http.idle_timeout_ms, "keep-alive connection idle (then closed)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--api-key", a->api_key,
                               "require Authorization: Bearer KEY (or env STAVE_API_KEY; visible in ps: prefer "
                               "--api-key-file)");
                sub.add_option("--api-key-file", a->api_key_file, "read the API key from the first line of this file");
                sub.add_flag("--envelope", a->envelope, "Workers AI envelope {result, success, errors, messages}");
                sub.add_flag("--quiet", a->quiet, "no access log");
                return std::function<int()>([a] { return run(*a); });
              },
              15}};

}  // namespace
}  // namespace stave::cli
