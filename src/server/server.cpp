// The HTTP front of stave serve: routes, admission, auth, metrics and the access log around
// Engine::decide. Each piece lives in its own file; this one wires them to cpp-httplib.
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/access_log.h"
#include "server/admission_queue.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/model_names.h"
#include "server/systemone_body.h"
#include "synth/synth_release.h"

namespace stave::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJson = "application/json";

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The client's X-Request-Id when it is a sane token (so traces join up), else our own.
bool usable_request_id(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
}

// A request body as read under the size limit.
struct Payload {
  std::string text;
  bool too_large = false;
  bool incomplete = false;  // the connection ended or timed out mid-body
};

// What a systemone job hands back to the connection thread that waits for it.
struct Outcome {
  DecisionRequest request;
  std::optional<Decision> decision;
  std::optional<ApiError> error;
};

}  // namespace

struct Server::Impl {
  Impl(const ServeOptions& o)
      : names(o.engine.model, o.model_name, o.aliases, o.default_aliases),
        admission(static_cast<size_t>(std::max(1, o.max_running)), static_cast<size_t>(std::max(0, o.max_queue))),
        log(stderr, o.access_log) {
    std::random_device rd;
    id_prefix = fmt::format("{:08x}", rd());
  }

  httplib::Server http;
  socket_t listen_socket = INVALID_SOCKET;  // recorded when the listener is made (bind())
  ModelNames names;
  Metrics metrics;
  AdmissionQueue admission;
  AccessLog log;
  std::string id_prefix;
  std::atomic<uint64_t> next_id{1};
  std::atomic<double> compute_s_ewma{0.05};  // for Retry-After

  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  std::shared_ptr<const Engine> engine;
  std::string load_error;
  bool stopping = false, run_started = false, run_finished = false, http_stop_called = false;
  std::thread loader;

  std::shared_ptr<const Engine> current_engine() const {
    std::lock_guard<std::mutex> lock(mutex);
    return engine;
  }
  bool is_stopping() const {
    std::lock_guard<std::mutex> lock(mutex);
    return stopping;
  }
  int retry_after_s() const {
    const double per = compute_s_ewma.load();
    const double waiting = static_cast<double>(admission.queued() + admission.running() + 1);
    const double s = std::ceil(per * waiting / static_cast<double>(admission.workers()));
    return static_cast<int>(std::clamp(s, 1.0, 60.0));
  }
};

Server::Server(ServeOptions options) : options_(std::move(options)), impl_(std::make_unique<Impl>(options_)) {
  Impl& m = *impl_;
  const bool envelope = options_.workers_ai_envelope;
  m.http.set_payload_max_length(options_.max_body_bytes);
  const int threads = options_.http_threads > 0 ? options_.http_threads
                                                : std::max(32, options_.max_running + options_.max_queue + 8);
  m.http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // A keep-alive connection serves up to 100 requests (upstream's default since 0.12; Debian's
  // 0.11 closes after 5, which makes steady clients reconnect every fifth request).
  m.http.set_keep_alive_max_count(100);

  // Every routed request: an id, the reply, then metrics and one access-log line. `payload` is
  // the body as read under the size limit (POST) or req.body (GET).
  using Body = std::function<void(const httplib::Request&, httplib::Response&, AccessRecord&, Clock::time_point,
                                  const Payload&)>;
  auto route = [this, &m](const std::string& endpoint, Body body) {
    return [this, &m, endpoint, body](const httplib::Request& req, httplib::Response& res, const Payload& payload) {
      const auto t0 = Clock::now();
      AccessRecord rec;
      const std::string given = req.get_header_value("X-Request-Id");
      rec.request_id = usable_request_id(given) ? given : fmt::format("{}-{}", m.id_prefix, m.next_id.fetch_add(1));
      res.set_header("X-Request-Id", rec.request_id);
      res.status = 200;  // httplib fills it in only after the handler; the log and metrics need it now
      try {
        body(req, res, rec, t0, payload);
      } catch (const std::exception& e) {
        const ApiError err = api_error(500, "internal_error", e.what());
        res.status = err.status;
        res.set_content(render_error(err, options_.workers_ai_envelope), kJson);
        rec.error_type = err.type();
      }
      rec.method = req.method;
      rec.path = req.path;
      rec.remote = req.remote_addr;
      rec.status = res.status;
      rec.latency_ms = ms_between(t0, Clock::now());
      rec.bytes_in = payload.text.size();
      rec.bytes_out = res.body.size();
      m.metrics.count_request(endpoint, res.status);
      m.log.write(rec);
    };
  };
  auto get = [](auto handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) { handler(req, res, Payload{req.body}); };
  };
  auto reply_error = [envelope](httplib::Response& res, AccessRecord& rec, const ApiError& e) {
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(render_error(e, envelope), kJson);
    rec.error_type = e.type();
  };
  auto authorized = [this](const httplib::Request& req) {
    return options_.api_key.empty() || bearer_token_matches(req.get_header_value("Authorization"), options_.api_key);
  };
  auto unauthorized = [] {
    return api_error(401, "unauthorized", "a valid API key is required: send \"Authorization: Bearer <key>\"",
                     {"header", "Authorization"});
  };
  auto loading = [] {
    ApiError e = api_error(503, "loading", "the model is still loading");
    e.retry_after_s = 1;
    return e;
  };

  auto systemone = route("/v1/systemone", [this, &m, reply_error, authorized, unauthorized, loading](
                                             const httplib::Request& req, httplib::Response& res, AccessRecord& rec,
                                             Clock::time_point t0, const Payload& payload) {
    if (!authorized(req)) return reply_error(res, rec, unauthorized());
    if (payload.too_large)
      return reply_error(res, rec,
                         api_error(413, "too_large",
                                   fmt::format("the request body is over the server's limit of {} bytes",
                                               options_.max_body_bytes),
                                   {"body"}));
    if (payload.incomplete)
      return reply_error(res, rec, api_error(400, "body_incomplete", "the request body could not be read whole", {"body"}));
    std::shared_ptr<const Engine> engine = m.current_engine();
    if (!engine) return reply_error(res, rec, loading());
    auto parsed = parse_systemone_body(payload.text, m.names, options_.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, rec, *e);
    auto outcome = std::make_shared<Outcome>();
    outcome->request = std::move(std::get<DecisionRequest>(parsed));
    rec.model = outcome->request.model;
    DecideOptions decide = options_.decide;
    decide.include_logits = false;
    auto job = m.admission.try_submit([outcome, engine, decide, &m] {
      const auto start = Clock::now();
      try {
        outcome->decision = engine->decide(outcome->request, decide);
      } catch (const RequestValidationError& e) {
        outcome->error = from_validation(e);
      } catch (const Error& e) {
        outcome->error = from_engine_error(e);
      } catch (const std::exception& e) {
        outcome->error = api_error(500, "internal_error", e.what());
      }
      const double s = ms_between(start, Clock::now()) / 1000.0;
      m.compute_s_ewma.store(0.8 * m.compute_s_ewma.load() + 0.2 * s);
    });
    if (!job) {
      ApiError e = api_error(503, "overloaded",
                             fmt::format("the server is at capacity ({} running, {} waiting); retry later",
                                         m.admission.workers(), m.admission.capacity()));
      e.retry_after_s = m.retry_after_s();
      return reply_error(res, rec, e);
    }
    if (!m.admission.wait(job, t0 + std::chrono::milliseconds(options_.timeout_ms)))
      return reply_error(res, rec,
                         api_error(504, "timeout", fmt::format("no answer within {} ms", options_.timeout_ms)));
    if (outcome->error) return reply_error(res, rec, *outcome->error);
    const Decision& d = *outcome->decision;
    const double latency_ms = ms_between(t0, Clock::now());
    res.status = 200;
    res.set_content(render_systemone_reply(d, latency_ms, options_.workers_ai_envelope), kJson);
    rec.input_tokens = d.usage.input_tokens;
    m.metrics.observe_decision(d.usage.input_tokens, latency_ms / 1000.0, d.timings.total_ms / 1000.0);
  });
  // The body is read here, chunk by chunk, so that no body (chunked ones included, which
  // httplib would otherwise read whole) is held beyond the limit.
  m.http.Post("/v1/systemone", [this, systemone](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& reader) {
    // Past the limit the rest is read and dropped (so the client, still sending, gets the 413
    // instead of a connection reset), up to a bound after which the connection is cut.
    Payload payload;
    size_t dropped = 0;
    const size_t drop_limit = std::max<size_t>(options_.max_body_bytes, size_t{64} << 20);
    const bool complete = reader([&](const char* data, size_t n) {
      if (!payload.too_large && payload.text.size() + n > options_.max_body_bytes) {
        payload.too_large = true;
        std::string().swap(payload.text);
      }
      if (payload.too_large) return (dropped += n) <= drop_limit;
      payload.text.append(data, n);
      return true;
    });
    // httplib refuses a Content-Length over the limit itself (it skips the body unread).
    if (!complete && !payload.too_large && req.get_header_value<uint64_t>("Content-Length") > options_.max_body_bytes)
      payload.too_large = true;
    if (!complete) res.set_header("Connection", "close");  // the rest of the body is unread
    payload.incomplete = !complete && !payload.too_large;
    systemone(req, res, payload);
  });

  m.http.Get("/v1/models", get(route("/v1/models", [this, &m, reply_error, authorized, unauthorized, loading](
                                                       const httplib::Request& req, httplib::Response& res,
                                                       AccessRecord& rec, Clock::time_point, const Payload&) {
    if (!authorized(req)) return reply_error(res, rec, unauthorized());
    std::shared_ptr<const Engine> engine = m.current_engine();
    if (!engine) return reply_error(res, rec, loading());
    const ModelInfo& info = engine->info();
    nlohmann::ordered_json model;
    model["id"] = m.names.id();
    model["object"] = "model";
    model["owned_by"] = "stave";
    model["names"] = m.names.names();
    model["context_length"] = options_.decide.max_length;
    model["max_position_embeddings"] = info.max_position_embeddings;
    model["capabilities"] = {{"systemone", true},
                             {"vision", info.vision},
                             {"question_types", {"noul", "choice", "score"}},
                             {"max_questions", options_.limits.max_questions.value_or(0)},
                             {"max_choice_options", options_.limits.max_choice_options.value_or(0)},
                             {"max_score_levels", options_.limits.max_score_levels.value_or(0)}};
    model["weight_format"] = info.weight_format;
    model["precision"] = to_string(info.precision);
    nlohmann::ordered_json list = {{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}};
    res.set_content(list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
  })));

  m.http.Get("/health", get(route("/health", [this, &m](const httplib::Request&, httplib::Response& res,
                                                         AccessRecord& rec, Clock::time_point, const Payload&) {
    std::string status;
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      status = m.stopping ? "draining" : !m.load_error.empty() ? "failed" : m.engine ? "ok" : "loading";
    }
    nlohmann::ordered_json j = {{"status", status}, {"model", m.names.id()}};
    if (status == "failed") j["error"] = load_error();
    res.status = status == "ok" ? 200 : 503;
    if (status == "loading") res.set_header("Retry-After", "1");
    if (status != "ok") rec.error_type = status;
    res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJson);
  })));

  m.http.Get("/metrics", get(route("/metrics", [&m](const httplib::Request&, httplib::Response& res, AccessRecord&,
                                                    Clock::time_point, const Payload&) {
    GaugeSample g;
    g.queue_depth = static_cast<int64_t>(m.admission.queued());
    g.running = static_cast<int64_t>(m.admission.running());
    g.queue_capacity = static_cast<int64_t>(m.admission.capacity());
    g.workers = static_cast<int64_t>(m.admission.workers());
    g.loaded = m.current_engine() != nullptr;
    res.set_content(m.metrics.render(g), "text/plain; version=0.0.4");
  })));

  // Errors httplib answers itself (unknown path, body over the limit, unparsable request line)
  // get a JSON body in the same style, a metrics count and a log line. Replies our routes
  // already wrote keep their body.
  m.http.set_error_handler(httplib::Server::HandlerWithResponse([this, &m, envelope](const httplib::Request& req,
                                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    if (res.status == 404)
      e = api_error(404, "not_found", "no route " + req.method + " " + req.path +
                                          " (routes: POST /v1/systemone, GET /v1/models, GET /health, GET /metrics)");
    else if (res.status == 413)
      e = api_error(413, "too_large",
                    fmt::format("the request body is over the server's limit of {} bytes", options_.max_body_bytes),
                    {"body"});
    else
      e = api_error(res.status, "http_error", fmt::format("HTTP error {}", res.status));
    res.set_content(render_error(e, envelope), kJson);
    AccessRecord rec;
    rec.request_id = fmt::format("{}-{}", m.id_prefix, m.next_id.fetch_add(1));
    res.set_header("X-Request-Id", rec.request_id);
    rec.method = req.method;
    rec.path = req.path;
    rec.remote = req.remote_addr;
    rec.status = res.status;
    rec.bytes_in = req.body.size();
    rec.bytes_out = res.body.size();
    rec.error_type = e.type();
    const bool known = req.path == "/v1/systemone" || req.path == "/v1/models" || req.path == "/health" ||
                       req.path == "/metrics";
    m.metrics.count_request(known ? req.path : "other", res.status);
    m.log.write(rec);
    return httplib::Server::HandlerResponse::Handled;
  }));
}

Server::~Server() {
  stop();
  if (impl_->loader.joinable()) impl_->loader.join();
}

// Debian's libcpp-httplib (0.11) listens with a backlog of 5, fixed when the library was built.
// When more clients than that connect at once (a load test's start, a burst after a coalesced
// batch's replies), the kernel drops handshakes, the clients' first requests stall in TCP
// retransmission past the server's 5 s wait for them, and the server closes those connections
// unanswered (seen: 3 of 32 clients on the GPU machine, 18 of 64 on 2 cores). listen() on a
// listening socket only resizes its backlog, so bind() repeats it with a deeper one.
constexpr int kListenBacklog = 1024;  // the kernel caps it at net.core.somaxconn

int Server::bind() {
  Impl& m = *impl_;
  m.http.set_socket_options([&m](socket_t s) {
    httplib::default_socket_options(s);
    m.listen_socket = s;
  });
  if (options_.port == 0) {
    port_ = m.http.bind_to_any_port(options_.host);
  } else {
    port_ = m.http.bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0)
    throw Error(ErrorKind::kIo, fmt::format("cannot listen on {}:{} (address in use, or not an address of this "
                                            "machine)", options_.host, options_.port));
  if (m.listen_socket != INVALID_SOCKET && ::listen(m.listen_socket, kListenBacklog) != 0)
    throw Error(ErrorKind::kIo, fmt::format("cannot set the listen backlog of {}:{}", options_.host, port_));
  return port_;
}

void Server::run() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.stopping) {
      m.run_finished = true;
      m.cv.notify_all();
      return;
    }
    m.run_started = true;
  }
  m.log.event("listening", {{"address", fmt::format("http://{}:{}", options_.host, port_)}});
  m.http.listen_after_bind();  // returns after stop(), once its connection threads are joined
  m.admission.shutdown();
  m.log.event("stopped");
  std::lock_guard<std::mutex> lock(m.mutex);
  m.run_finished = true;
  m.cv.notify_all();
}

void Server::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (!m.stopping) m.stopping = true;
    if (!m.run_started || m.run_finished || m.http_stop_called) return;
  }
  // listen_after_bind() flags itself running a moment after run() began: wait for that, then
  // close the listener exactly once.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(m.mutex);
      if (m.run_finished || m.http_stop_called) return;
      if (m.http.is_running()) {
        m.http_stop_called = true;
        m.log.event("draining");
        m.http.stop();
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Server::load_in_background() {
  Impl& m = *impl_;
  m.loader = std::thread([this, &m] {
    const auto t0 = Clock::now();
    try {
      std::shared_ptr<const Engine> engine = Engine::load(options_.engine);
      const std::string path = engine->info().path;
      // Checked once here rather than refused on every request.
      if (options_.decide.max_length <= 0 || options_.decide.max_length > engine->info().max_position_embeddings)
        throw Error(ErrorKind::kInvalidModel,
                    fmt::format("--max-length {} must be between 1 and the model's max_position_embeddings {}",
                                options_.decide.max_length, engine->info().max_position_embeddings));
      set_engine(std::move(engine));
      m.log.event("loaded", {{"model", m.names.id()},
                             {"path", path},
                             {"seconds", fmt::format("{:.3f}", ms_between(t0, Clock::now()) / 1000.0)}});
      if (synth::is_synthetic_release(path))
        m.log.event("warning", {{"message", path + " was made by `stave synth`: its weights are RANDOM, so the "
                                                   "answers are meaningless"}});
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(m.mutex);
        m.load_error = e.what();
      }
      m.log.event("load_failed", {{"error", e.what()}});
      m.cv.notify_all();
      stop();
    }
  });
}

void Server::set_engine(std::shared_ptr<const Engine> engine) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.engine = std::move(engine);
  }
  engine_ready_ = true;
  m.cv.notify_all();
}

std::string Server::load_error() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->load_error;
}

void Server::wait_loaded_or_failed() const {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->cv.wait(lock, [&] { return impl_->engine || !impl_->load_error.empty(); });
}

AdmissionQueue& Server::admission() { return impl_->admission; }

}  // namespace stave::server
