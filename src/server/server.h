// `stave serve`: the SystemOne HTTP server over one Engine.
//
//   POST /v1/chat/completions, /v1/completions
//                        OpenAI-compatible generation (server/openai_service.h), streaming too
//   POST /v1/systemone   a SystemOne request → the response `stave decide` gives, plus
//                        usage.truncated_state_tokens, usage.latency_ms, an X-Request-Id header
//   GET  /v1/models      the served model: id, names, capabilities, context length
//   GET  /health         503 until the model is loaded (and while draining), then 200
//   GET  /metrics        Prometheus text format
//
// Lifecycle: bind() (fails fast on a taken port) → run() on some thread, which serves until
// stop() → the engine arrives through load() (background) or set_engine() (tests). stop() is
// graceful: the listener closes, requests already received are answered, then run() returns.
#pragma once
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "server/serve_options.h"
#include "stave/engine.h"
#include "stave/language_model.h"

namespace stave::server {

class AdmissionQueue;

class Server {
 public:
  explicit Server(ServeOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds options.host:options.port; returns the port (the chosen one when port is 0).
  // Throws stave::Error(kIo) when the address cannot be bound.
  int bind();
  // Serves until stop(); returns once every received request has been answered.
  void run();
  // Thread-safe; may be called before, during or after run().
  void stop();

  // Loads options.engine on a background thread; on failure the server stops and
  // load_error() says why.
  void load_in_background();
  void set_engine(std::shared_ptr<const Engine> engine);
  // The language model behind POST /v1/chat/completions and /v1/completions (tests; load() sets
  // it when the release has an lm_head).
  void set_language_model(std::shared_ptr<const LanguageModel> lm);
  bool loaded() const { return engine_ready_.load(); }
  std::string load_error() const;
  void wait_loaded_or_failed() const;

  const ServeOptions& options() const { return options_; }
  AdmissionQueue& admission();             // decisions' workers (tests occupy them through it)
  AdmissionQueue& generation_admission();  // generations' slots (--max-decode-batch, --max-queue)
  int port() const { return port_; }

  struct Impl;

 private:
  void load_language_model();
  ServeOptions options_;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> engine_ready_{false};
  int port_ = -1;
};

}  // namespace stave::server
