#include "server/http_stream.h"

namespace stave::server {

bool HttpStream::write(const std::string& bytes) {
  std::function<void()> notify;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A piece larger than the whole buffer still goes, alone.
    room_.wait(lock, [&] { return closed_ || buffer_.empty() || buffer_.size() + bytes.size() <= max_buffered_; });
    if (closed_ || ended_) return false;  // nothing may follow the end
    buffer_ += bytes;
    if (want_notify_) {
      want_notify_ = false;
      notify = notify_;
    }
  }
  if (notify) notify();
  return true;
}

void HttpStream::end() {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    // The last notify: the reader takes the end (now, or after the write under way) and closes.
    if (want_notify_) notify = std::move(notify_);
    notify_ = nullptr;
    want_notify_ = false;
  }
  if (notify) notify();
}

void HttpStream::set_notify(std::function<void()> notify) {
  std::lock_guard<std::mutex> lock(mutex_);
  notify_ = std::move(notify);
}

HttpStream::Piece HttpStream::take() {
  Piece p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p.bytes.swap(buffer_);
    p.ended = ended_ && p.bytes.empty();
    if (p.bytes.empty() && !ended_) want_notify_ = true;
  }
  room_.notify_all();
  return p;
}

void HttpStream::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    buffer_.clear();
    notify_ = nullptr;
  }
  room_.notify_all();
}

bool HttpStream::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

}  // namespace stave::server
