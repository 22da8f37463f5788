#include "server/admission_queue.h"

#include <algorithm>

namespace stave::server {

AdmissionQueue::AdmissionQueue(size_t workers, size_t capacity)
    : n_workers_(std::max<size_t>(workers, 1)), capacity_(capacity) {
  threads_.reserve(n_workers_);
  for (size_t i = 0; i < n_workers_; ++i) threads_.emplace_back([this] { worker_loop(); });
}

AdmissionQueue::~AdmissionQueue() { shutdown(); }

std::shared_ptr<AdmissionQueue::Job> AdmissionQueue::try_submit(std::function<void()> work,
                                                                std::function<void()> after) {
  auto job = std::make_shared<Job>(std::move(work), std::move(after));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutdown_) return nullptr;
    // Queued jobs include those a free worker is about to take, so count the system as a whole.
    if (running_ + queue_.size() >= n_workers_ + capacity_) return nullptr;
    queue_.push_back(job);
  }
  work_cv_.notify_one();
  return job;
}

bool AdmissionQueue::wait(const std::shared_ptr<Job>& job, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_cv_.wait_until(lock, deadline, [&] { return job->state_ == Job::State::kDone; })) return true;
  if (job->state_ == Job::State::kQueued) {
    job->state_ = Job::State::kCancelled;
    queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
  }
  return false;
}

bool AdmissionQueue::cancel(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (job->state_ != Job::State::kQueued) return false;
  job->state_ = Job::State::kCancelled;
  queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
  return true;
}

size_t AdmissionQueue::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

size_t AdmissionQueue::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void AdmissionQueue::shutdown() {
  std::lock_guard<std::mutex> once(shutdown_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void AdmissionQueue::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return !queue_.empty() || shutdown_; });
      if (queue_.empty()) return;  // shut down and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      job->state_ = Job::State::kRunning;
      ++running_;
    }
    job->work_();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job->state_ = Job::State::kDone;
      --running_;
    }
    done_cv_.notify_all();
    if (job->after_) job->after_();
  }
}

}  // namespace stave::server
