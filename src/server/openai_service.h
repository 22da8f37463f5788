// POST /v1/chat/completions and POST /v1/completions over one LanguageModel, with the server's
// admission policy (503 + Retry-After when full), deadline (504 before the reply starts), access
// log and request metrics; their own metrics are server/openai_metrics.h.
// A stream answers with server-sent events through HttpStream (server/http_stream.h): the
// generation blocks while the client is slow to read, and stops between decode steps when the
// client goes away.
// Generation runs through one GenerationScheduler (engine/generation_scheduler.h): each request
// holds a slot of the generation admission queue (OpenAiHost::admission — the server gives it
// --max-decode-batch slots and --max-queue waiting, apart from the decisions' workers) while it
// waits for its tokens, and the scheduler decodes all of them together (continuous batching, at
// most --max-decode-batch per step); the slot's thread runs the request's callbacks, so a slow
// client delays only its own request.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/generation_scheduler.h"
#include "server/access_log.h"
#include "server/admission_queue.h"
#include "server/api_error.h"
#include "server/http_exchange.h"
#include "server/metrics.h"
#include "server/model_names.h"
#include "server/openai_api.h"
#include "server/openai_metrics.h"
#include "server/serve_options.h"
#include "stave/language_model.h"

namespace stave::server {

// What the service uses of the server around it.
struct OpenAiHost {
  const ServeOptions& options;
  const ModelNames& names;
  Metrics& metrics;
  AdmissionQueue& admission;  // the generations' own (not the decisions' workers)
  std::function<HttpReply(AccessRecord&, const ApiError&)> error_reply;
  // Metrics and the access-log line for a reply about to be sent (t0: arrival).
  std::function<void(AccessRecord&, HttpReply&, std::chrono::steady_clock::time_point)> finish;
  std::function<void(const AccessRecord&)> log;  // a request that got no reply (client gone)
  std::function<int()> retry_after_s;
};

class OpenAiService {
 public:
  explicit OpenAiService(OpenAiHost host) : host_(std::move(host)) {}

  // The model (and its scheduler, from host.options.max_decode_batch), or why there is none (the release has no lm_head, the device is not the CPU).
  void set_model(std::shared_ptr<const LanguageModel> lm);
  void set_unavailable(std::string reason);
  bool available() const;
  std::string unavailable_reason() const;

  // Parses, admits and runs one request; returns the pending call, or nullptr once `done` was
  // called (an error, or a queue that is full).
  std::shared_ptr<HttpCall> handle(OpenAiKind kind, HttpRequest& req, AccessRecord rec,
                                   const std::function<void(HttpReply)>& done);
  GenerationMetrics& metrics() { return metrics_; }

  class Call;

 private:
  struct Loaded {
    std::shared_ptr<const LanguageModel> lm;
    std::shared_ptr<GenerationScheduler> scheduler;
  };
  Loaded model() const;

  OpenAiHost host_;
  GenerationMetrics metrics_;
  mutable std::mutex mutex_;
  std::shared_ptr<const LanguageModel> lm_;
  std::shared_ptr<GenerationScheduler> scheduler_;
  std::string unavailable_ = "the model is still loading";
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace stave::server
