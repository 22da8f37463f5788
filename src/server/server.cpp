// The application side of stave serve: routes, auth, admission, metrics and the access log
// around Engine::decide. The HTTP transport (sockets, parsing, limits, deadlines) is
// server/http_server.h; each other piece lives in its own file.
#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "decide/request_handle.h"
#include "io/synthetic_marker.h"
#include "server/access_log.h"
#include "server/admission_queue.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/model_names.h"
#include "server/openai_service.h"
#include "server/systemone_body.h"

namespace stave::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kSmallBodyBytes = 1024;  // routes that take no body (GET) accept at most this
const char* kRoutes =
    "routes: POST /v1/systemone, POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, "
    "GET /metrics";

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

bool is_generation_route(const std::string& path) {
  return path == "/v1/chat/completions" || path == "/v1/completions";
}

bool is_route(const std::string& path) {
  return path == "/v1/systemone" || is_generation_route(path) || path == "/v1/models" || path == "/health" || path == "/metrics";
}

HttpLimits transport_limits(const ServeOptions& o) {
  HttpLimits l = o.http;
  l.max_body_bytes = std::max(o.max_body_bytes, kSmallBodyBytes);
  return l;
}

bool is_loopback(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1" || host == "localhost";
}

}  // namespace

struct Server::Impl : HttpHandler {
  Impl(Server& s, const ServeOptions& o)
      : self(s),
        options(o),
        names(o.engine.model, o.model_name, o.aliases, o.default_aliases),
        log(stderr, o.access_log),
        http(transport_limits(o), *this, gauges),
        admission(static_cast<size_t>(std::max(1, o.max_running)), static_cast<size_t>(std::max(0, o.max_queue))),
        openai(OpenAiHost{o, names, metrics, generation,
                          [this](AccessRecord& rec, const ApiError& e) { return error_reply(rec, e); },
                          [this](AccessRecord& rec, HttpReply& r, Clock::time_point t0) { finish(rec, r, t0); },
                          [this](const AccessRecord& rec) { log.write(rec); },
                          [this] { return retry_after_s(); }}),
        generation(static_cast<size_t>(std::max(1, o.max_decode_batch)), static_cast<size_t>(std::max(0, o.max_queue))) {
    std::random_device rd;
    id_prefix = fmt::format("{:08x}", rd());
  }

  class DecisionCall;

  // HttpHandler
  HeadVerdict on_head(const HttpRequest& head) override;
  std::shared_ptr<HttpCall> on_request(HttpRequest request, std::function<void(HttpReply)> done) override;
  HttpReply refusal(HttpLimit limit, int status, const std::string& message, const HttpRequest* head) override;
  bool draining() const override { return is_stopping(); }

  // Routes that answer at once.
  HttpReply health(AccessRecord& rec);
  HttpReply models(AccessRecord& rec);
  HttpReply metrics_text();
  std::shared_ptr<HttpCall> systemone(HttpRequest& req, AccessRecord rec, std::function<void(HttpReply)>& done);

  AccessRecord record_for(const HttpRequest& req) {
    AccessRecord rec;
    const std::string given = req.header("X-Request-Id");
    rec.request_id = usable_request_id(given) ? given : fmt::format("{}-{}", id_prefix, next_id.fetch_add(1));
    rec.method = req.method;
    rec.path = req.path;
    rec.remote = req.remote;
    rec.bytes_in = req.body.size();
    return rec;
  }
  HttpReply error_reply(AccessRecord& rec, const ApiError& e) const {
    HttpReply r;
    r.status = e.status;
    if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
    if (e.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    r.body = render_error(e, options.workers_ai_envelope);
    rec.error_type = e.type();
    return r;
  }
  // Metrics and one access-log line for a reply about to be sent.
  void finish(AccessRecord& rec, HttpReply& reply, Clock::time_point t0) {
    reply.headers.emplace_back("X-Request-Id", rec.request_id);
    rec.status = reply.status;
    rec.latency_ms = ms_between(t0, Clock::now());
    rec.bytes_out = reply.body.size();
    metrics.count_request(is_route(rec.path) ? rec.path : "other", reply.status);
    log.write(rec);
  }
  bool authorized(const HttpRequest& req) const {
    return options.api_key.empty() || bearer_token_matches(req.header("Authorization"), options.api_key);
  }
  static ApiError unauthorized() {
    return api_error(401, "unauthorized", "a valid API key is required: send \"Authorization: Bearer <key>\"",
                     {"header", "Authorization"});
  }
  static ApiError loading() {
    ApiError e = api_error(503, "loading", "the model is still loading");
    e.retry_after_s = 1;
    return e;
  }
  static ApiError draining_error() {
    ApiError e = api_error(503, "draining", "the server is shutting down; retry on another instance");
    e.retry_after_s = 1;
    return e;
  }

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

  Server& self;
  const ServeOptions& options;
  ModelNames names;
  Metrics metrics;
  HttpGauges gauges;
  AccessLog log;
  HttpServer http;          // before admission: destroyed after the workers are joined
  AdmissionQueue admission;  // decisions: --max-running workers, --max-queue waiting
  OpenAiService openai;      // /v1/chat/completions, /v1/completions (over `generation`)
  // Generations: --max-decode-batch slots (each runs its request's callbacks while the
  // scheduler decodes it), --max-queue waiting; never the decisions' workers. After `openai`:
  // its workers (which use the service) are joined before the service goes.
  AdmissionQueue generation;
  std::string id_prefix;
  std::atomic<uint64_t> next_id{1};
  std::atomic<double> compute_s_ewma{0.05};
  const int64_t created_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();  // for Retry-After

  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  std::shared_ptr<const Engine> engine;
  std::string load_error;
  bool stopping = false, run_started = false, run_finished = false;
  std::thread loader;
};

// ---------------------------------------------------------------------------------------------
// A decision in flight: answered once, by the worker (the decision), the deadline (504) or
// nobody (the client went away). The deadline and the disconnect cancel the decision: taken out
// of the queue when still waiting, stopped between backbone layers when running.

class Server::Impl::DecisionCall : public HttpCall {
 public:
  DecisionCall(Impl& m, AccessRecord rec, Clock::time_point t0, std::function<void(HttpReply)> done)
      : m_(m), rec_(std::move(rec)), t0_(t0), deadline_(t0 + std::chrono::milliseconds(m.options.timeout_ms)),
        done_(std::move(done)) {}

  Clock::time_point deadline() const override { return deadline_; }
  void expire() override {
    if (answered_.exchange(true)) return;
    stop("deadline");
    const ApiError e = api_error(504, "timeout", fmt::format("no answer within {} ms", m_.options.timeout_ms));
    send(m_.error_reply(rec_, e));
  }
  void abandon() override {
    if (answered_.exchange(true)) return;
    stop("client_gone");
    rec_.status = 499;  // nginx's "client closed request": logged, never sent
    rec_.error_type = "client_gone";
    rec_.latency_ms = ms_between(t0_, Clock::now());
    m_.metrics.count_request(rec_.path, 499);
    m_.log.write(rec_);
  }

  // On a worker.
  void run(const std::shared_ptr<const Engine>& engine, const Request& request, DecideOptions decide) {
    if (cancel_.load()) return;
    decide.cancel = &cancel_;
    std::optional<Decision> decision;
    std::optional<ApiError> error;
    const auto start = Clock::now();
    try {
      decision = engine->decide(request, decide);
    } catch (const DecisionCancelled&) {
      return;  // answered (504) or abandoned already
    } catch (const RequestValidationError& e) {
      error = from_validation(e);
    } catch (const Error& e) {
      error = from_engine_error(e);
    } catch (const std::exception& e) {
      error = api_error(500, "internal_error", m_.names.redact(e.what()));
    }
    const double s = ms_between(start, Clock::now()) / 1000.0;
    m_.compute_s_ewma.store(0.8 * m_.compute_s_ewma.load() + 0.2 * s);
    if (answered_.exchange(true)) return;
    if (error) {
      if (error->status == 500) error->issues.front().msg = m_.names.redact(error->issues.front().msg);
      reply_ = m_.error_reply(rec_, *error);
      return;
    }
    const double latency_ms = ms_between(t0_, Clock::now());
    reply_.emplace();
    reply_->body = render_systemone_reply(*decision, latency_ms, m_.options.workers_ai_envelope);
    rec_.input_tokens = decision->usage.input_tokens;
    m_.metrics.observe_decision(decision->usage.input_tokens, latency_ms / 1000.0, decision->timings.total_ms / 1000.0);
  }
  // On the worker, once the admission queue no longer counts the job as running: the reply
  // run() made, if it made one.
  void deliver() {
    if (reply_) send(std::move(*reply_));
    reply_.reset();
  }

  std::shared_ptr<AdmissionQueue::Job> job;

 private:
  void stop(const char* reason) {
    cancel_ = true;
    if (job) m_.admission.cancel(job);
    m_.metrics.count_cancelled(reason);
  }
  void send(HttpReply r) {
    m_.finish(rec_, r, t0_);
    done_(std::move(r));
  }

  Impl& m_;
  AccessRecord rec_;
  Clock::time_point t0_, deadline_;
  std::function<void(HttpReply)> done_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> answered_{false};
  std::optional<HttpReply> reply_;  // run() → deliver(), same worker thread
};

// ---------------------------------------------------------------------------------------------
// Routes

HeadVerdict Server::Impl::on_head(const HttpRequest& head) {
  HeadVerdict v;
  v.body_limit = kSmallBodyBytes;
  auto answer = [&](const ApiError& e) {
    AccessRecord rec = record_for(head);
    HttpReply r = error_reply(rec, e);
    finish(rec, r, Clock::now());
    v.reply = std::move(r);
    return v;
  };
  const bool known = is_route(head.path);
  if (!known) return answer(api_error(404, "not_found", "no route " + head.method + " " + head.path + " (" + kRoutes + ")"));
  const bool post = head.path == "/v1/systemone" || is_generation_route(head.path);
  if (head.method != (post ? "POST" : "GET"))
    return answer(api_error(405, "method_not_allowed",
                            fmt::format("{} takes {}, not {}", head.path, post ? "POST" : "GET", head.method)));
  // The key is checked before a byte of the body is read.
  if (head.path.rfind("/v1/", 0) == 0 && !authorized(head)) return answer(unauthorized());
  if (post) {
    if (is_stopping()) return answer(draining_error());
    v.body_limit = options.max_body_bytes;
  }
  return v;
}

std::shared_ptr<HttpCall> Server::Impl::on_request(HttpRequest req, std::function<void(HttpReply)> done) {
  const auto t0 = Clock::now();
  AccessRecord rec = record_for(req);
  HttpReply reply;
  try {
    if (req.path == "/v1/systemone") {
      auto call = systemone(req, rec, done);
      if (call) return call;
      return nullptr;
    }
    if (is_generation_route(req.path))
      return openai.handle(req.path == "/v1/completions" ? OpenAiKind::kCompletion : OpenAiKind::kChat, req, rec, done);
    if (req.path == "/v1/models") reply = models(rec);
    else if (req.path == "/health") reply = health(rec);
    else reply = metrics_text();
  } catch (const std::exception& e) {
    reply = error_reply(rec, api_error(500, "internal_error", names.redact(e.what())));
  }
  finish(rec, reply, t0);
  done(std::move(reply));
  return nullptr;
}

std::shared_ptr<HttpCall> Server::Impl::systemone(HttpRequest& req, AccessRecord rec,
                                                  std::function<void(HttpReply)>& done) {
  const auto t0 = Clock::now();
  auto answer = [&](const ApiError& e) -> std::shared_ptr<HttpCall> {
    HttpReply r = error_reply(rec, e);
    finish(rec, r, t0);
    done(std::move(r));
    return nullptr;
  };
  std::shared_ptr<const Engine> eng = current_engine();
  if (!eng) return answer(loading());
  auto parsed = parse_systemone_body(req.body, names, options.limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    if (e->type() == "too_many_values") metrics.count_refused(to_string(HttpLimit::kJsonValues));
    return answer(*e);
  }
  const Request request = make_request(std::move(std::get<DecisionRequest>(parsed)));
  std::string().swap(req.body);  // the parsed request is all that is kept
  rec.model = request.model();
  auto call = std::make_shared<DecisionCall>(*this, rec, t0, done);
  DecideOptions decide = options.decide;
  decide.include_logits = false;
  call->job = admission.try_submit([call, eng, request, decide] { call->run(eng, request, decide); },
                                    [call] { call->deliver(); });
  if (!call->job) {
    ApiError e = api_error(503, "overloaded",
                           fmt::format("the server is at capacity ({} running, {} waiting); retry later",
                                       admission.workers(), admission.capacity()));
    e.retry_after_s = retry_after_s();
    return answer(e);
  }
  return call;
}

HttpReply Server::Impl::models(AccessRecord& rec) {
  std::shared_ptr<const Engine> eng = current_engine();
  if (!eng) return error_reply(rec, loading());
  const ModelInfo& info = eng->info();
  nlohmann::ordered_json model;
  model["id"] = names.id();
  model["object"] = "model";
  model["created"] = created_unix;
  model["owned_by"] = "stave";
  model["names"] = names.public_names();
  model["context_length"] = options.decide.max_length;
  model["max_position_embeddings"] = info.max_position_embeddings;
  model["capabilities"] = {{"systemone", true},
                           {"vision", info.vision},
                           {"question_types", {"noul", "choice", "score"}},
                           {"max_questions", options.limits.max_questions.value_or(0)},
                           {"max_choice_options", options.limits.max_choice_options.value_or(0)},
                           {"max_score_levels", options.limits.max_score_levels.value_or(0)}};
  model["capabilities"]["chat_completions"] = openai.available();
  model["capabilities"]["completions"] = openai.available();
  if (!openai.available()) model["capabilities"]["language_model_unavailable"] = names.redact(openai.unavailable_reason());
  model["weight_format"] = info.weight_format;
  model["precision"] = to_string(info.precision);
  nlohmann::ordered_json list = {{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}};
  HttpReply r;
  r.body = list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpReply Server::Impl::health(AccessRecord& rec) {
  std::string status, error;
  {
    std::lock_guard<std::mutex> lock(mutex);
    status = stopping ? "draining" : !load_error.empty() ? "failed" : engine ? "ok" : "loading";
    error = load_error;
  }
  nlohmann::ordered_json j = {{"status", status}, {"model", names.id()}};
  if (status == "failed") j["error"] = names.redact(error);
  HttpReply r;
  r.status = status == "ok" ? 200 : 503;
  if (status == "loading") r.headers.emplace_back("Retry-After", "1");
  if (status != "ok") rec.error_type = status;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpReply Server::Impl::metrics_text() {
  GaugeSample g;
  g.queue_depth = static_cast<int64_t>(admission.queued());
  g.running = static_cast<int64_t>(admission.running());
  g.queue_capacity = static_cast<int64_t>(admission.capacity());
  g.workers = static_cast<int64_t>(admission.workers());
  g.loaded = current_engine() != nullptr;
  g.open_connections = gauges.open_connections.load();
  g.waiting = gauges.waiting.load();
  g.bytes_in_flight = gauges.bytes_in_flight.load();
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics.render(g);
  openai.metrics().render(r.body);
  render_generation_gauges(r.body, static_cast<int64_t>(generation.queued()), static_cast<int64_t>(generation.running()),
                           static_cast<int64_t>(generation.capacity()), static_cast<int64_t>(generation.workers()));
  return r;
}

HttpReply Server::Impl::refusal(HttpLimit limit, int status, const std::string& message, const HttpRequest* head) {
  metrics.count_refused(to_string(limit));
  const char* type = "bad_request";
  std::vector<std::string> loc;
  switch (limit) {
    case HttpLimit::kHeaderBytes:
    case HttpLimit::kHeaderFields: type = "headers_too_large"; loc = {"header"}; break;
    case HttpLimit::kRequestLine: type = "uri_too_long"; break;
    case HttpLimit::kBodyBytes: type = "too_large"; loc = {"body"}; break;
    case HttpLimit::kHeaderTimeout:
    case HttpLimit::kBodyTimeout: type = "request_timeout"; break;
    case HttpLimit::kConnections:
    case HttpLimit::kConnectionsPerAddress:
    case HttpLimit::kFileDescriptors: type = "overloaded"; break;
    case HttpLimit::kJsonValues: type = "too_many_values"; loc = {"body"}; break;
    case HttpLimit::kFraming: break;
  }
  ApiError e = api_error(status, type, message, loc);
  if (status == 503) e.retry_after_s = 1;
  HttpRequest none;
  none.path = "-";
  AccessRecord rec = record_for(head ? *head : none);
  HttpReply r = error_reply(rec, e);
  finish(rec, r, Clock::now());
  return r;
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

Server::Server(ServeOptions options) : options_(std::move(options)), impl_(std::make_unique<Impl>(*this, options_)) {}

Server::~Server() {
  stop();
  if (impl_->loader.joinable()) impl_->loader.join();
}

int Server::bind() {
  Impl& m = *impl_;
  // Each connection is a descriptor: take what the hard limit allows.
  const uint64_t files = raise_open_file_limit();
  port_ = m.http.bind(options_.host, options_.port);
  const uint64_t needed = options_.http.max_connections + 64;
  if (options_.http.max_connections > 0 && files < needed)
    m.log.event("warning", {{"message", fmt::format("the open-file limit is {}; --max-connections {} needs about {} "
                                                    "(raise `ulimit -n`)",
                                                    files, options_.http.max_connections, needed)}});
  if (!is_loopback(options_.host) && options_.api_key.empty())
    m.log.event("warning", {{"message", fmt::format("listening on {} beyond loopback without an API key: anyone who "
                                                    "can reach it can use the model (--api-key-file)",
                                                    options_.host)}});
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
  m.http.run();  // returns after stop(), once every connection is answered and closed
  m.admission.shutdown();
  m.generation.shutdown();
  m.log.event("stopped");
  std::lock_guard<std::mutex> lock(m.mutex);
  m.run_finished = true;
  m.cv.notify_all();
}

void Server::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.stopping) return;
    m.stopping = true;
    if (m.run_started && !m.run_finished) m.log.event("draining");
  }
  m.http.drain();
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
      load_language_model();
      m.log.event("loaded", {{"model", m.names.id()},
                             {"path", path},
                             {"seconds", fmt::format("{:.3f}", ms_between(t0, Clock::now()) / 1000.0)}});
      if (is_synthetic_release(path))
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

// The generation endpoints need the release's lm_head; a release without one (or a device the
// language model does not run on) serves /v1/systemone alone. The weights are memory-mapped, so
// this second view of the release the Engine opened costs little memory.
void Server::load_language_model() {
  Impl& m = *impl_;
  try {
    set_language_model(LanguageModel::load(options_.engine));
  } catch (const Error& e) {
    m.openai.set_unavailable(e.what());
    m.log.event("warning", {{"message", m.names.redact(std::string("POST /v1/chat/completions and /v1/completions are off: ") + e.what())}});
  }
}

void Server::set_language_model(std::shared_ptr<const LanguageModel> lm) { impl_->openai.set_model(std::move(lm)); }

std::string Server::load_error() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->load_error;
}

void Server::wait_loaded_or_failed() const {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->cv.wait(lock, [&] { return impl_->engine || !impl_->load_error.empty(); });
}

AdmissionQueue& Server::admission() { return impl_->admission; }
AdmissionQueue& Server::generation_admission() { return impl_->generation; }

}  // namespace stave::server
