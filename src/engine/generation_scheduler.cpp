#include "engine/generation_scheduler.h"

#include <algorithm>
#include <exception>

#include "engine/generation_sequence.h"
#include "engine/language_model_impl.h"

namespace stave {

// One submitted request: its generation and state (the loop's), and what goes back to its
// caller — the callbacks to run, then the result or the error.
struct GenerationScheduler::Request {
  Request(const LanguageModel::Impl& m, std::span<const int32_t> prompt, const GenerationOptions& options,
          const TextCallback& on_text)
      : seq(m, prompt, options, on_text) {}

  GenerationSequence seq;
  Backbone::SequenceState state;
  std::atomic<bool> abandoned{false};  // a callback of the caller threw: stop as if cancelled
  GenerationSequence::Deliver post = [this](std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(std::move(f));
    changed.notify_one();
  };

  bool cancelled() const { return abandoned.load(std::memory_order_relaxed) || seq.cancelled(); }
  void succeed() {
    Generation g = seq.finish(post);
    std::lock_guard<std::mutex> lock(mutex);
    result = std::move(g);
    done = true;
    changed.notify_one();
  }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    error = std::move(e);
    done = true;
    changed.notify_one();
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> events;
  bool done = false;
  Generation result;
  std::exception_ptr error;
};

GenerationScheduler::GenerationScheduler(std::shared_ptr<const LanguageModel> model, SchedulerOptions options)
    : model_(std::move(model)), options_(std::move(options)) {
  if (!model_) throw Error(ErrorKind::kInvalidRequest, "the generation scheduler needs a language model");
  if (options_.max_batch < 1)
    throw Error(ErrorKind::kInvalidRequest, "the decode batch bound must be at least 1, got " + std::to_string(options_.max_batch));
  if (options_.prefill_tokens < 1)
    throw Error(ErrorKind::kInvalidRequest,
                "the prefill tokens per iteration must be at least 1, got " + std::to_string(options_.prefill_tokens));
  thread_ = std::thread([this] { loop(); });
}

GenerationScheduler::~GenerationScheduler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

int64_t GenerationScheduler::running() const { return running_count_.load(std::memory_order_relaxed); }

int64_t GenerationScheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(waiting_.size());
}

Generation GenerationScheduler::generate(std::span<const int32_t> prompt_ids, const GenerationOptions& options,
                                         const TextCallback& on_text) {
  auto r = std::make_shared<Request>(*model_->impl_, prompt_ids, options, on_text);  // the request's checks throw here
  const GenerationSequence::Deliver now = [](const std::function<void()>& f) { f(); };
  if (r->seq.ended()) return r->seq.finish(now);
  if (r->cancelled()) throw DecisionCancelled();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw Error(ErrorKind::kInternal, "the generation scheduler has stopped");
    waiting_.push_back(r);
  }
  work_.notify_one();
  // Run the request's callbacks here, in order, until the loop is done with it.
  std::exception_ptr callback_error;
  for (;;) {
    std::deque<std::function<void()>> events;
    bool done = false;
    {
      std::unique_lock<std::mutex> lock(r->mutex);
      r->changed.wait(lock, [&] { return r->done || !r->events.empty(); });
      events.swap(r->events);
      done = r->done;
    }
    for (auto& f : events) {
      // A failed callback or a cancelled request: what the loop picked meanwhile is not handed out.
      if (callback_error || r->cancelled()) break;
      try {
        f();
      } catch (...) {
        callback_error = std::current_exception();
        r->abandoned.store(true);
      }
    }
    if (done) break;
  }
  if (callback_error) std::rethrow_exception(callback_error);
  if (r->error) std::rethrow_exception(r->error);
  return std::move(r->result);
}

void GenerationScheduler::loop() {
  const LanguageModel::Impl& m = *model_->impl_;
  m.set_threads();
  for (;;) {
    std::vector<std::shared_ptr<Request>> admitted;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
      if (stop_) break;
      int64_t tokens = 0;
      while (!waiting_.empty() && static_cast<int64_t>(running_.size() + admitted.size()) < options_.max_batch) {
        const auto n = static_cast<int64_t>(waiting_.front()->seq.prompt().size());
        if (!admitted.empty() && tokens + n > options_.prefill_tokens) break;
        tokens += n;
        admitted.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    admit(admitted);
    drop_cancelled();
    if (!running_.empty()) step();
  }
  // Stopped: nobody is left waiting on a request that will never finish.
  const auto stopped = std::make_exception_ptr(Error(ErrorKind::kInternal, "the generation scheduler stopped"));
  for (auto& r : running_) r->fail(stopped);
  running_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& r : waiting_) r->fail(stopped);
  waiting_.clear();
}

void GenerationScheduler::admit(std::vector<std::shared_ptr<Request>>& admitted) {
  const LanguageModel::Impl& m = *model_->impl_;
  for (auto& r : admitted) {
    if (r->cancelled()) {
      r->fail(std::make_exception_ptr(DecisionCancelled()));
      continue;
    }
    try {
      r->state = m.backbone->new_state(r->seq.expected_tokens());
      std::vector<float> logits = m.last_logits(m.backbone->prefill(r->seq.prompt(), r->state));
      if (r->seq.take(logits, r->post)) r->succeed();
      else running_.push_back(std::move(r));
    } catch (...) {
      r->fail(std::current_exception());
    }
  }
  running_count_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
}

void GenerationScheduler::drop_cancelled() {
  std::vector<std::shared_ptr<Request>> gone;
  std::erase_if(running_, [&](const std::shared_ptr<Request>& r) {
    if (!r->cancelled()) return false;
    gone.push_back(r);
    return true;
  });
  running_count_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
  for (auto& r : gone) r->fail(std::make_exception_ptr(DecisionCancelled()));
}

void GenerationScheduler::step() {
  const LanguageModel::Impl& m = *model_->impl_;
  const auto n = static_cast<int64_t>(running_.size());
  std::vector<Backbone::SequenceState*> states;
  std::vector<int32_t> next;
  states.reserve(running_.size());
  next.reserve(running_.size());
  for (auto& r : running_) {
    states.push_back(&r->state);
    next.push_back(r->seq.last_token());
  }
  std::vector<float> hidden;
  try {
    hidden = m.backbone->decode_batch(states, next);
  } catch (...) {
    // An error inside the step leaves the states unusable: every sequence in it ends with it.
    const auto e = std::current_exception();
    std::vector<std::shared_ptr<Request>> failed;
    failed.swap(running_);
    running_count_.store(0, std::memory_order_relaxed);
    for (auto& r : failed) r->fail(e);
    return;
  }
  if (options_.on_step) options_.on_step(n);
  // The lm_head in blocks of the model's row block (exact precision: the rows of one block are
  // each computed as a row alone would be).
  const int64_t H = m.backbone->hidden_size(), V = m.lm_head->vocab();
  const int64_t block = std::min(n, m.head_rows);
  std::vector<float> logits(static_cast<size_t>(block * V));
  // Finished ones leave the batch first, then are completed (so running() no longer counts a
  // request whose caller has its result).
  std::vector<std::pair<std::shared_ptr<Request>, std::exception_ptr>> finished;
  std::vector<bool> ended(running_.size(), false);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    m.lm_head->logits(*m.head_backend, hidden.data() + r0 * H, rows, logits.data());
    for (int64_t i = 0; i < rows; ++i) {
      const auto at = static_cast<size_t>(r0 + i);
      Request& r = *running_[at];
      try {
        ended[at] = r.seq.take(std::span(logits).subspan(static_cast<size_t>(i * V), static_cast<size_t>(V)), r.post);
        if (ended[at]) finished.emplace_back(running_[at], nullptr);
      } catch (...) {
        ended[at] = true;
        finished.emplace_back(running_[at], std::current_exception());
      }
    }
  }
  size_t keep = 0;
  for (size_t i = 0; i < running_.size(); ++i)
    if (!ended[i]) running_[keep++] = std::move(running_[i]);
  running_.resize(keep);
  running_count_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
  for (auto& [r, error] : finished) {
    if (error) r->fail(error);
    else r->succeed();
  }
}

}  // namespace stave
