// Bounded admission: `workers` decisions run at once, at most `capacity` more wait; a submit
// beyond that is refused at once (the server answers 503 + Retry-After) instead of letting
// latency and memory grow without bound. A caller that stops waiting (its deadline passed, its
// client went away) cancels its job if it has not started (cancel()); a running job is stopped
// by its own means (the server's decisions carry a cancel flag the engine checks).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace stave::server {

class AdmissionQueue {
 public:
  using Clock = std::chrono::steady_clock;
  class Job;

  AdmissionQueue(size_t workers, size_t capacity);
  ~AdmissionQueue();  // shutdown()
  AdmissionQueue(const AdmissionQueue&) = delete;
  AdmissionQueue& operator=(const AdmissionQueue&) = delete;

  // Queues `work` (run on a worker thread; it must not throw), then `after` on the same thread
  // once the job counts as done (running() no longer includes it). nullptr when the queue is
  // full or shut down.
  std::shared_ptr<Job> try_submit(std::function<void()> work, std::function<void()> after = {});
  // True when the job finished by `deadline`; false when the deadline passed first (the job is
  // then cancelled if still queued, or left to finish unobserved if running).
  bool wait(const std::shared_ptr<Job>& job, Clock::time_point deadline);

  // Removes a job that has not started; true when it was still queued (it will never run).
  bool cancel(const std::shared_ptr<Job>& job);

  size_t queued() const;
  size_t running() const;
  size_t workers() const { return n_workers_; }
  size_t capacity() const { return capacity_; }

  // Refuses new jobs, runs the queued ones, joins the workers. Idempotent.
  void shutdown();

 private:
  void worker_loop();

  const size_t n_workers_;
  const size_t capacity_;
  std::mutex shutdown_mutex_;  // serialises shutdown() (joins happen once)
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // a job was queued, or shutdown
  std::condition_variable done_cv_;  // a job finished
  std::deque<std::shared_ptr<Job>> queue_;
  size_t running_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

class AdmissionQueue::Job {
 public:
  Job(std::function<void()> work, std::function<void()> after)
      : work_(std::move(work)), after_(std::move(after)) {}

 private:
  friend class AdmissionQueue;
  enum class State { kQueued, kRunning, kDone, kCancelled };
  std::function<void()> work_;
  std::function<void()> after_;
  State state_ = State::kQueued;  // guarded by the queue's mutex
};

}  // namespace stave::server
