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
  std::vector<std::shared_ptr<Request>> batch;
  for (auto& r : admitted) {
    if (r->cancelled()) {
      r->fail(std::make_exception_ptr(DecisionCancelled()));
      continue;
    }
    // What the backbone would refuse fails this request alone, before anything runs.
    try {
      r->state = m.backbone->new_state(r->seq.expected_tokens());
      m.backbone->check_extend(r->seq.prompt(), r->state);
      batch.push_back(std::move(r));
    } catch (...) {
      r->fail(std::current_exception());
    }
  }
  if (batch.empty()) return;
  const std::vector<float> hidden = prefill(batch);
  Ended ended = pick(batch, hidden);
  for (auto& r : batch) running_.push_back(std::move(r));
  running_count_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
  complete(ended);
}

std::vector<float> GenerationScheduler::prefill(std::vector<std::shared_ptr<Request>>& batch) {
  const LanguageModel::Impl& m = *model_->impl_;
  const int64_t H = m.backbone->hidden_size();
  bool again = false;  // a packed pass failed: fresh states
  if (batch.size() > 1) {
    std::vector<std::span<const int32_t>> ids;
    std::vector<Backbone::SequenceState*> states;
    int64_t tokens = 0;
    for (auto& r : batch) {
      ids.emplace_back(r->seq.prompt());
      states.push_back(&r->state);
      tokens += static_cast<int64_t>(r->seq.prompt().size());
    }
    std::vector<float> hidden;
    try {
      hidden = m.backbone->prefill_batch(ids, states);
    } catch (...) {
      again = true;  // the states are unusable; whatever failed, each request tries alone
    }
    if (!again) {
      if (options_.on_prefill) options_.on_prefill(static_cast<int64_t>(batch.size()), tokens);
      return hidden;
    }
  }
  std::vector<float> hidden;
  hidden.reserve(batch.size() * static_cast<size_t>(H));
  size_t keep = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Request& r = *batch[i];
    std::vector<float> rows;
    try {
      if (again) r.state = m.backbone->new_state(r.seq.expected_tokens());
      rows = m.backbone->prefill(r.seq.prompt(), r.state);
    } catch (...) {
      r.fail(std::current_exception());
      continue;
    }
    if (options_.on_prefill) options_.on_prefill(1, static_cast<int64_t>(r.seq.prompt().size()));
    hidden.insert(hidden.end(), rows.end() - H, rows.end());
    if (keep != i) batch[keep] = std::move(batch[i]);
    ++keep;
  }
  batch.resize(keep);
  return hidden;
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
  Ended ended = pick(running_, hidden);
  running_count_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
  complete(ended);
}

GenerationScheduler::Ended GenerationScheduler::pick(std::vector<std::shared_ptr<Request>>& batch,
                                                     const std::vector<float>& hidden) {
  const LanguageModel::Impl& m = *model_->impl_;
  const auto n = static_cast<int64_t>(batch.size());
  // The lm_head in blocks of the model's row block (exact precision: the rows of one block are
  // each computed as a row alone would be).
  const int64_t H = m.backbone->hidden_size(), V = m.lm_head->vocab();
  const int64_t block = std::min(n, m.head_rows);
  std::vector<float> logits(static_cast<size_t>(std::max<int64_t>(block, 0) * V));
  Ended ended;
  std::vector<bool> gone(batch.size(), false);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    try {
      m.lm_head->logits(*m.head_backend, hidden.data() + r0 * H, rows, logits.data());
    } catch (...) {  // the block's requests end with the error; the loop goes on
      for (int64_t i = 0; i < rows; ++i) {
        gone[static_cast<size_t>(r0 + i)] = true;
        ended.emplace_back(batch[static_cast<size_t>(r0 + i)], std::current_exception());
      }
      continue;
    }
    for (int64_t i = 0; i < rows; ++i) {
      const auto at = static_cast<size_t>(r0 + i);
      Request& r = *batch[at];
      try {
        gone[at] = r.seq.take(std::span(logits).subspan(static_cast<size_t>(i * V), static_cast<size_t>(V)), r.post);
        if (gone[at]) ended.emplace_back(batch[at], nullptr);
      } catch (...) {
        gone[at] = true;
        ended.emplace_back(batch[at], std::current_exception());
      }
    }
  }
  size_t keep = 0;
  for (size_t i = 0; i < batch.size(); ++i)
    if (!gone[i]) batch[keep++] = std::move(batch[i]);
  batch.resize(keep);
  return ended;
}

void GenerationScheduler::complete(Ended& ended) {
  for (auto& [r, error] : ended) {
    if (error) r->fail(error);
    else r->succeed();
  }
}

}  // namespace stave
