#include "server/openai_service.h"

#include <optional>
#include <random>

#include <fmt/format.h>

#include "server/http_stream.h"

namespace stave::server {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_hex() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

// An error of the language model for a request: kInvalidRequest / kUnsupported → 400,
// kRequestTooLarge (the prompt is past the context) → 400 as OpenAI answers it, else 500.
ApiError from_model_error(const Error& e, const ModelNames& names) {
  switch (e.kind()) {
    case ErrorKind::kInvalidRequest:
    case ErrorKind::kUnsupported:
    case ErrorKind::kRequestTooLarge: return api_error(400, "invalid_request_error", e.what(), {"body"});
    default: return api_error(500, "internal_error", names.redact(e.what()));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One generation: answered once — by the worker (the reply, or the head of a stream), the
// deadline (504, only before the reply started) or nobody (the client went away).

class OpenAiService::Call : public HttpCall {
 public:
  Call(OpenAiService& s, OpenAiRequest request, AccessRecord rec, Clock::time_point t0, std::function<void(HttpReply)> done)
      : s_(s), req_(std::move(request)), rec_(std::move(rec)), t0_(t0),
        deadline_(t0 + std::chrono::milliseconds(s.host_.options.timeout_ms)), done_(std::move(done)) {
    ids_.id = (req_.kind == OpenAiKind::kChat ? "chatcmpl-" : "cmpl-") + random_hex();
    ids_.created = unix_now();
    ids_.model = s.host_.names.id();
    if (req_.stream) stream_ = std::make_shared<HttpStream>();
  }

  Clock::time_point deadline() const override { return deadline_; }
  void expire() override {
    if (answered_.exchange(true)) return;
    stop("deadline");
    send(s_.host_.error_reply(rec_, api_error(504, "timeout", fmt::format("no reply within {} ms", s_.host_.options.timeout_ms))));
  }
  void abandon() override {
    stop("client_gone");
    if (answered_.exchange(true)) return;
    log_gone();
  }

  // On an admission worker.
  void run(const std::shared_ptr<const LanguageModel>& lm, GenerationScheduler& sched) {
    if (cancel_.load()) return;
    try {
      if (req_.generation.logprobs >= 0) {
        logprobs_.emplace();
        logprobs_->token_text = [lm](int32_t id) { return lm->token_text(id); };
        logprobs_->token_bytes = [lm](int32_t id) { return lm->token_bytes(id); };
      }
      const std::vector<int32_t> ids = prompt_ids(*lm);
      fit_context(static_cast<int64_t>(ids.size()));
      if (req_.stream) run_stream(sched, ids);
      else run_whole(sched, ids);
    } catch (const DecisionCancelled&) {
      if (stream_) stream_->close();
    } catch (const Error& e) {
      fail(from_model_error(e, s_.host_.names));
    } catch (const std::exception& e) {
      fail(api_error(500, "internal_error", s_.host_.names.redact(e.what())));
    }
  }

  std::shared_ptr<AdmissionQueue::Job> job;

 private:
  std::vector<int32_t> prompt_ids(const LanguageModel& lm) const {
    if (req_.kind == OpenAiKind::kChat) return lm.tokenize(lm.render_chat(req_.body));
    if (req_.prompt) return lm.tokenize(*req_.prompt);
    for (const int32_t id : req_.prompt_token_ids)
      if (id < 0 || id >= lm.vocab_size())
        throw Error(ErrorKind::kInvalidRequest, fmt::format("prompt token id {} is outside the vocabulary [0, {})", id, lm.vocab_size()));
    return req_.prompt_token_ids;
  }

  // The server's context length (--max-length, /v1/models' context_length) bounds prompt +
  // completion as vLLM's --max-model-len does: a prompt that fills it, or a max_tokens the
  // request set past what is left, is a 400; a default budget shrinks to what is left.
  void fit_context(int64_t prompt_tokens) {
    const int64_t context = s_.host_.options.decide.max_length;
    if (prompt_tokens >= context)
      throw Error(ErrorKind::kInvalidRequest,
                  fmt::format("the prompt has {} tokens; this server's context length is {} tokens (prompt and completion)",
                              prompt_tokens, context));
    int64_t& max_tokens = req_.generation.max_tokens;
    if (prompt_tokens + max_tokens <= context) return;
    if (req_.max_tokens_given)
      throw Error(ErrorKind::kInvalidRequest,
                  fmt::format("this server's context length is {} tokens; the request asks for {} ({} in the prompt, {} "
                              "in the completion): lower max_tokens / max_completion_tokens or shorten the prompt",
                              context, prompt_tokens + max_tokens, prompt_tokens, max_tokens));
    max_tokens = context - prompt_tokens;
  }

  // The options of this request plus the cancel flag and the token timing.
  GenerationOptions options() {
    GenerationOptions g = req_.generation;
    g.cancel = &cancel_;
    g.on_token = [this](int32_t) {
      s_.metrics_.count_token();
      const auto now = Clock::now();
      if (tokens_ == 0) {
        first_token_ = now;
        s_.metrics_.observe_first_token(seconds_between(t0_, now));
      } else {
        s_.metrics_.observe_inter_token(seconds_between(last_token_, now));
      }
      last_token_ = now;
      ++tokens_;
    };
    return g;
  }

  void observe(const Generation& g) {
    s_.metrics_.observe_generation(static_cast<int64_t>(g.prompt_token_ids.size()),
                                   static_cast<int64_t>(g.completion_token_ids.size()),
                                   tokens_ > 1 ? seconds_between(first_token_, last_token_) : 0.0);
    rec_.input_tokens = static_cast<int64_t>(g.prompt_token_ids.size());
  }

  void run_whole(GenerationScheduler& sched, const std::vector<int32_t>& ids) {
    const Generation g = sched.generate(ids, options());
    observe(g);
    if (answered_.exchange(true)) return;
    HttpReply r;
    r.body = render_openai_reply(req_.kind, ids_, g, lp());
    send(std::move(r));
  }

  void run_stream(GenerationScheduler& sched, const std::vector<int32_t>& ids) {
    if (answered_.exchange(true)) return;
    HttpReply head;
    head.content_type = "text/event-stream";
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.stream = stream_;
    send(std::move(head));
    head_sent_ = true;
    const OpenAiKind kind = req_.kind;
    if (kind == OpenAiKind::kChat) push(render_openai_chunk(kind, ids_, "", true, nullptr));
    Generation g;
    // With logprobs, each text chunk carries the steps picked since the last chunk; the final
    // chunk those whose text was held back or is not shown (a stop token, text past a stop string).
    std::vector<StepLogprobs> pending;
    GenerationOptions go = options();
    go.on_logprobs = [&](const StepLogprobs& s) { pending.push_back(s); };
    try {
      g = sched.generate(ids, go, [&](std::string_view piece) {
        push(render_openai_chunk(kind, ids_, piece, false, nullptr, lp(), pending));
        pending.clear();
      });
    } catch (const DecisionCancelled&) {
      if (tokens_ > 0) s_.metrics_.observe_generation(static_cast<int64_t>(ids.size()), tokens_, seconds_between(first_token_, last_token_));
      throw;
    } catch (const Error& e) {  // after the head: the error goes as an event, then the stream ends
      const ApiError a = from_model_error(e, s_.host_.names);
      push(render_openai_stream_error(a.message(), a.type()));
      push("[DONE]");
      stream_->end();
      return;
    }
    observe(g);
    push(render_openai_chunk(kind, ids_, "", false, &g.finish_reason, lp(), pending));
    if (req_.include_usage)
      push(render_openai_usage_chunk(kind, ids_, static_cast<int64_t>(g.prompt_token_ids.size()),
                                     static_cast<int64_t>(g.completion_token_ids.size())));
    push("[DONE]");
    stream_->end();
  }

  // One event; a closed stream (the client went away) stops the generation at its next step.
  void push(const std::string& payload) {
    if (!stream_->write(sse_event(payload))) {
      if (!cancel_.exchange(true)) {
        s_.host_.metrics.count_cancelled("client_gone");
        log_gone();
      }
    }
  }

  // Before the reply started: the error is the reply. After a stream's head: an error event, then
  // the end of the stream.
  void fail(const ApiError& e) {
    if (answered_.exchange(true)) {
      if (head_sent_ && !stream_->closed()) {
        push(render_openai_stream_error(e.message(), e.type()));
        push("[DONE]");
        stream_->end();
      }
      return;
    }
    send(s_.host_.error_reply(rec_, e));
  }
  void stop(const char* reason) {
    if (cancel_.exchange(true)) return;
    if (job) s_.host_.admission.cancel(job);
    if (stream_) stream_->close();
    s_.host_.metrics.count_cancelled(reason);
  }
  void log_gone() {
    AccessRecord rec = rec_;
    rec.status = 499;  // nginx's "client closed request": logged, never sent
    rec.error_type = "client_gone";
    rec.latency_ms = seconds_between(t0_, Clock::now()) * 1000.0;
    s_.host_.metrics.count_request(rec.path, 499);
    s_.host_.log(rec);
  }
  void send(HttpReply r) {
    s_.host_.finish(rec_, r, t0_);
    done_(std::move(r));
  }

  LogprobsView* lp() { return logprobs_ ? &*logprobs_ : nullptr; }

  OpenAiService& s_;
  OpenAiRequest req_;
  std::optional<LogprobsView> logprobs_;  // set when the request asked for logprobs
  AccessRecord rec_;
  Clock::time_point t0_, deadline_;
  std::function<void(HttpReply)> done_;
  OpenAiReplyIds ids_;
  std::shared_ptr<HttpStream> stream_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> answered_{false};
  bool head_sent_ = false;  // the worker's own
  int64_t tokens_ = 0;
  Clock::time_point first_token_, last_token_;
};

// ---------------------------------------------------------------------------------------------

void OpenAiService::set_model(std::shared_ptr<const LanguageModel> lm) {
  SchedulerOptions so;
  so.max_batch = host_.options.max_decode_batch;
  so.on_step = [this](int64_t n) { metrics_.observe_decode_step(n); };
  so.on_prefill = [this](int64_t n, int64_t) { metrics_.observe_prefill(n); };
  auto scheduler = std::make_shared<GenerationScheduler>(lm, std::move(so));
  std::lock_guard<std::mutex> lock(mutex_);
  lm_ = std::move(lm);
  scheduler_ = std::move(scheduler);
  unavailable_.clear();
}

void OpenAiService::set_unavailable(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  lm_.reset();
  scheduler_.reset();
  unavailable_ = std::move(reason);
}

bool OpenAiService::available() const { return model().lm != nullptr; }

std::string OpenAiService::unavailable_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unavailable_;
}

OpenAiService::Loaded OpenAiService::model() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {lm_, scheduler_};
}

std::shared_ptr<HttpCall> OpenAiService::handle(OpenAiKind kind, HttpRequest& req, AccessRecord rec,
                                                const std::function<void(HttpReply)>& done) {
  const auto t0 = Clock::now();
  auto answer = [&](const ApiError& e) -> std::shared_ptr<HttpCall> {
    HttpReply r = host_.error_reply(rec, e);
    host_.finish(rec, r, t0);
    done(std::move(r));
    return nullptr;
  };
  const Loaded loaded = model();
  if (!loaded.lm) {
    const std::string why = unavailable_reason();
    if (why == "the model is still loading") {
      ApiError e = api_error(503, "loading", why);
      e.retry_after_s = 1;
      return answer(e);
    }
    return answer(api_error(501, "not_implemented", "this server has no language model: " + host_.names.redact(why)));
  }
  auto parsed = parse_openai_request(kind, req.body, GenerationOptions{}.max_tokens);
  if (auto* e = std::get_if<ApiError>(&parsed)) return answer(*e);
  OpenAiRequest request = std::move(std::get<OpenAiRequest>(parsed));
  std::string().swap(req.body);
  if (!request.model.empty() && !host_.names.serves(request.model))
    return answer(api_error(404, "model_not_found",
                            fmt::format("this server serves \"{}\", not \"{}\"", host_.names.id(), request.model),
                            {"body", "model"}));
  rec.model = request.model.empty() ? host_.names.id() : request.model;
  auto call = std::make_shared<Call>(*this, std::move(request), rec, t0, done);
  call->job = host_.admission.try_submit([call, loaded] { call->run(loaded.lm, *loaded.scheduler); });
  if (!call->job) {
    ApiError e = api_error(503, "overloaded",
                           fmt::format("the server is at capacity ({} running, {} waiting); retry later",
                                       host_.admission.workers(), host_.admission.capacity()));
    e.retry_after_s = host_.retry_after_s();
    return answer(e);
  }
  return call;
}

}  // namespace stave::server
