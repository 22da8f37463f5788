// The contract between the HTTP transport (server/http_server.h: sockets, parsing, limits,
// deadlines) and the application (server.cpp: routes, auth, admission): plain structs, no
// networking types, so routes are written and tested without Asio.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_limits.h"

namespace stave::server {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent ("/v1/models?x=1")
  std::string path;    // target without the query
  std::string remote;  // peer address
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;    // empty until the body is read
  // First value of a header (case-insensitive name), "" when absent.
  std::string header(std::string_view name) const;
};

// The writing end of a streamed reply (server-sent events, e.g. streamed chat completions):
// each write() goes out as one HTTP/1.1 chunk, in order, as soon as the connection can take it.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Any thread. False once the client has gone away or the stream ended: the producer should
  // stop (and cancel its work).
  virtual bool write(std::string chunk) = 0;
  // Any thread: the last chunk; the connection then goes on with its next request (or closes).
  virtual void end() = 0;
  // Bytes queued and not yet written (a producer far ahead of a slow client should wait).
  virtual size_t pending_bytes() const = 0;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: a streamed reply. `body` is ignored; the head goes out with Transfer-Encoding: chunked
  // and then `stream` is called once (on the connection's thread; it must not block) with the
  // ResponseStream to write to, e.g. handing it to the worker producing the events.
  std::function<void(std::shared_ptr<ResponseStream>)> stream;
};

// A reply that is computed elsewhere (a decision on a worker). The transport arms deadline()
// and calls expire() when it passes (the call answers 504 and stops its work), and abandon()
// when the client goes away (the call stops its work and answers nobody).
class HttpCall {
 public:
  virtual ~HttpCall() = default;
  virtual std::chrono::steady_clock::time_point deadline() const = 0;
  virtual void expire() = 0;
  virtual void abandon() = 0;
};

// What the application decides once a request's head is read, before its body is.
struct HeadVerdict {
  size_t body_limit = 0;           // bytes this route accepts
  std::optional<HttpReply> reply;  // set: answer now without reading the body (then close)
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual HeadVerdict on_head(const HttpRequest& head) = 0;
  // The whole request. `done` may be called on any thread, at most once; on_request returns
  // the pending call, or nullptr when it already called `done`.
  virtual std::shared_ptr<HttpCall> on_request(HttpRequest request, std::function<void(HttpReply)> done) = 0;
  // A request or connection the transport refused itself (framing, a limit, a deadline): the
  // reply it will send (null for a connection closed without one). For metrics and the log.
  virtual HttpReply refusal(HttpLimit limit, int status, const std::string& message, const HttpRequest* head) = 0;
  virtual bool draining() const = 0;
};

}  // namespace stave::server
