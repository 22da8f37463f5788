// One HTTP/1.1 connection of HttpServer (server/http_server.h): a state machine on the
// connection's strand. idle (waiting for a request's first byte, idle deadline) → head (header
// deadline) → body (body deadline) → call (the handler's reply; the socket is watched so a
// client that goes away cancels its decision) → write → idle again for keep-alive, or linger
// and close. Requests pipelined on one connection are answered one after another, in order.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http_parse.h"
#include "server/http_server.h"
#include "server/http_stream.h"

namespace stave::server {

class Connection;

// The connections of one server: counts per peer address, and the list drain() walks.
class ConnectionRegistry {
 public:
  ConnectionRegistry(const HttpLimits& limits, HttpHandler& handler, HttpGauges& gauges)
      : limits(limits), handler(handler), gauges(gauges) {}
  // nullopt: admitted (and counted); else the limit it is over.
  std::optional<HttpLimit> admit(const std::string& address);
  void add(const std::shared_ptr<Connection>& c);
  void remove(Connection* c, const std::string& address);
  // Every live connection, for drain().
  std::vector<std::shared_ptr<Connection>> snapshot();

  const HttpLimits& limits;
  HttpHandler& handler;
  HttpGauges& gauges;
  std::atomic<bool> draining{false};

 private:
  std::mutex mutex_;
  size_t open_ = 0;
  std::unordered_map<std::string, size_t> per_address_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> live_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, std::string address, std::shared_ptr<ConnectionRegistry> registry);
  ~Connection();
  void start();
  // At the end of the drain grace: close if no request is under way (idle, or still sending
  // its head). Every reply written while draining closes its connection anyway.
  void close_if_waiting();

 private:
  enum class Phase { kIdle, kHead, kBody, kCall, kWrite, kLinger, kClosed };
  using Clock = std::chrono::steady_clock;

  void arm_deadline(int timeout_ms);
  void disarm_deadline();
  void read_idle();
  void read_head();
  void continue_head();
  void on_head(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void call(HttpRequest request);
  void watch();
  void on_watch(boost::beast::error_code ec, size_t n);
  void on_reply(HttpReply reply);
  void refuse(const Refusal& r, const HttpRequest* head);
  void write(HttpReply reply, bool close_after);
  void on_write(boost::beast::error_code ec, bool close_after);
  void write_stream(HttpReply reply, bool close_after);  // a reply with a stream: head, then chunks
  void stream_next(bool close_after);
  void linger();
  void linger_read();
  void close();
  void hold(int64_t bytes);  // bytes_in_flight accounting

  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer timer_;  // the head's, the body's or the decision's deadline
  uint64_t deadline_gen_ = 0;        // a timer_ wait that fires for an older phase does nothing
  bool timed_out_ = false;
  size_t head_bytes_seen_ = 0, head_lines_seen_ = 0;  // of the head being read, taken by the parser
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  std::optional<HttpRequest> head_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::shared_ptr<HttpCall> call_;
  std::shared_ptr<HttpStream> body_stream_;  // the streamed body being written
  std::string chunk_out_;                    // the chunk being written
  bool stream_writing_ = false;
  std::optional<HttpReply> pending_reply_;
  std::string address_;
  std::shared_ptr<ConnectionRegistry> registry_;
  Phase phase_ = Phase::kIdle;
  bool watching_ = false;
  bool keep_alive_ = true;
  bool counted_waiting_ = false;
  int64_t held_ = 0;
};

}  // namespace stave::server
