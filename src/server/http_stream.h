// A response body written while it is produced (server-sent events): a bounded byte queue
// between the thread that produces (a generation on its admission slot) and the connection
// that writes it as chunked transfer encoding. The producer blocks while `max_buffered` bytes
// wait unsent, so a client that reads slowly slows its generation instead of growing memory;
// once the connection is gone, write() returns false and the producer stops.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace stave::server {

class HttpStream {
 public:
  explicit HttpStream(size_t max_buffered = 64 * 1024) : max_buffered_(max_buffered) {}

  // Producer (any thread). Appends `bytes`, first waiting while the buffer is full. false: the
  // reader is gone (closed), nothing more will be sent.
  bool write(const std::string& bytes);
  // Producer: the body is complete.
  void end();

  // Transport. `notify` is called (on the producer's thread) when bytes or the end arrive after
  // a take() that found nothing; it should post the next take() to the connection's executor.
  void set_notify(std::function<void()> notify);
  struct Piece {
    std::string bytes;
    bool ended = false;  // no bytes will follow
  };
  // Everything buffered. Empty bytes and !ended: nothing yet; notify comes when there is.
  Piece take();
  // The reader is gone: wakes and refuses the producer.
  void close();
  bool closed() const;

 private:
  const size_t max_buffered_;
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::string buffer_;
  std::function<void()> notify_;
  bool want_notify_ = false;
  bool ended_ = false;
  bool closed_ = false;
};

}  // namespace stave::server
