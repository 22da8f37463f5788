#include "server/http_connection.h"

#include <algorithm>
#include <deque>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <cstdio>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

namespace stave::server {
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kReadChunk = 16 * 1024;  // body reads, lingering reads
constexpr size_t kIdleRead = 1024;        // the first read of a request: small, many connections idle

std::chrono::milliseconds ms(int v) { return std::chrono::milliseconds(std::max(1, v)); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Registry

std::optional<HttpLimit> ConnectionRegistry::admit(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (limits.max_connections > 0 && open_ >= limits.max_connections) return HttpLimit::kConnections;
  size_t& mine = per_address_[address];
  if (limits.max_connections_per_address > 0 && mine >= limits.max_connections_per_address) {
    if (mine == 0) per_address_.erase(address);
    return HttpLimit::kConnectionsPerAddress;
  }
  ++mine;
  ++open_;
  gauges.open_connections = static_cast<int64_t>(open_);
  return std::nullopt;
}

void ConnectionRegistry::add(const std::shared_ptr<Connection>& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.emplace(c.get(), c);
}

void ConnectionRegistry::remove(Connection* c, const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(c);
  if (auto it = per_address_.find(address); it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  --open_;
  gauges.open_connections = static_cast<int64_t>(open_);
}

std::vector<std::shared_ptr<Connection>> ConnectionRegistry::snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Connection>> out;
  out.reserve(live_.size());
  for (auto& [p, w] : live_)
    if (auto c = w.lock()) out.push_back(std::move(c));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Connection

Connection::Connection(tcp::socket socket, std::string address, std::shared_ptr<ConnectionRegistry> registry)
    : stream_(std::move(socket)),
      timer_(stream_.get_executor()),
      buffer_(registry->limits.header_bytes + kReadChunk),
      address_(std::move(address)),
      registry_(std::move(registry)) {}

Connection::~Connection() {
  hold(-held_);
  if (counted_waiting_) --registry_->gauges.waiting;
  registry_->remove(this, address_);
}

void Connection::hold(int64_t bytes) {
  held_ += bytes;
  registry_->gauges.bytes_in_flight += bytes;
}

void Connection::start() {
  registry_->add(shared_from_this());
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_idle(); });
}

void Connection::close_if_waiting() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kHead) self->close();
  });
}

void Connection::read_idle() {
  phase_ = Phase::kIdle;
  parser_.reset();
  head_.reset();
  if (buffer_.size() > 0) return read_head();  // a pipelined request is already here
  stream_.expires_after(ms(registry_->limits.idle_timeout_ms));
  const size_t room = std::min(kIdleRead, buffer_.max_size() - buffer_.size());
  stream_.async_read_some(buffer_.prepare(room), [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (self->phase_ != Phase::kIdle) return;
    self->buffer_.commit(n);
    if (ec || n == 0) return self->close();  // idle timeout, peer closed, or drain grace over
    self->read_head();
  });
}

// The head and body deadlines run on timer_ rather than the stream's own expiry, which would
// close the socket: on time-out the read is cancelled and the client still gets its 408.
void Connection::arm_deadline(int timeout_ms) {
  const uint64_t gen = ++deadline_gen_;
  timed_out_ = false;
  stream_.expires_never();
  timer_.expires_after(ms(timeout_ms));
  timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->deadline_gen_ || self->phase_ == Phase::kClosed) return;
    self->timed_out_ = true;
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);
  });
}

void Connection::disarm_deadline() {
  ++deadline_gen_;
  timer_.cancel();
}

void Connection::read_head() {
  phase_ = Phase::kHead;
  parser_.emplace();
  configure_parser(*parser_, registry_->limits);
  arm_deadline(registry_->limits.header_timeout_ms);
  head_bytes_seen_ = head_lines_seen_ = 0;
  continue_head();
}

// The head is read into buffer_ (at most header_bytes) and its lines are counted before the
// parser sees a complete head, so a head of thousands of tiny fields is refused before Beast
// builds a field list of that size.
void Connection::continue_head() {
  const HttpLimits& limits = registry_->limits;
  const std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  // Beast consumes the head line by line as it arrives: count what it took before, plus what
  // is buffered up to the head's end.
  const size_t end = data.find("\r\n\r\n");
  const size_t head = end == std::string_view::npos ? data.size() : end + 4;
  if (head_bytes_seen_ + head > limits.header_bytes) {
    disarm_deadline();
    return refuse(*refusal_for(http::error::header_limit, false, true, limits), nullptr);
  }
  auto lines_in = [&](size_t n) {
    return static_cast<size_t>(std::count(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n), '\n'));
  };
  if (head_lines_seen_ + lines_in(head) > limits.header_fields + 2) {
    disarm_deadline();
    return refuse(Refusal{HttpLimit::kHeaderFields, 431,
                          "the request head has more than " + std::to_string(limits.header_fields) + " fields"},
                  nullptr);
  }
  if (head > 0) {
    beast::error_code ec;
    const size_t used = parser_->put(net::buffer(data.data(), head), ec);
    head_lines_seen_ += lines_in(used);
    head_bytes_seen_ += used;
    buffer_.consume(used);
    if (!ec && parser_->is_header_done()) return on_head({});
    if (ec && ec != http::error::need_more) return on_head(ec);
  }
  const size_t room = std::min(kReadChunk, buffer_.max_size() - buffer_.size());
  stream_.async_read_some(buffer_.prepare(room), [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (self->phase_ != Phase::kHead) return;
    self->buffer_.commit(n);
    if (ec) return self->on_head(ec);
    self->continue_head();
  });
}

void Connection::on_head(beast::error_code ec) {
  if (phase_ != Phase::kHead) return;
  disarm_deadline();
  const HttpLimits& limits = registry_->limits;
  if (timed_out_) ec = beast::error::timeout;
  if (ec) {
    if (auto r = refusal_for(ec, false, true, limits)) return refuse(*r, nullptr);
    return close();
  }
  if (auto r = check_head(*parser_, limits)) return refuse(*r, nullptr);
  head_ = head_of(*parser_, address_);
  keep_alive_ = parser_->keep_alive();
  HeadVerdict verdict = registry_->handler.on_head(*head_);
  if (verdict.reply) return write(std::move(*verdict.reply), /*close_after=*/true);  // the body stays unread
  if (auto r = set_body_limit(*parser_, verdict.body_limit)) return refuse(*r, &*head_);
  if (parser_->is_done()) return on_body({});
  if (beast::iequals(head_->header("Expect"), "100-continue")) {
    // The client waits for this before it sends the body (curl does for large bodies).
    auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    stream_.expires_after(ms(limits.write_timeout_ms));
    return net::async_write(stream_, net::buffer(*cont), [self = shared_from_this(), cont](beast::error_code e, size_t) {
      if (e) return self->close();
      self->read_body();
    });
  }
  read_body();
}

void Connection::read_body() {
  phase_ = Phase::kBody;
  arm_deadline(registry_->limits.body_timeout_ms);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void Connection::on_body(beast::error_code ec) {
  if (phase_ != Phase::kBody && phase_ != Phase::kHead) return;
  disarm_deadline();
  if (timed_out_) ec = beast::error::timeout;
  if (ec) {
    if (auto r = refusal_for(ec, true, true, registry_->limits)) return refuse(*r, &*head_);
    return close();
  }
  HttpRequest request = std::move(*head_);
  head_.reset();
  request.body = std::move(parser_->get().body());
  keep_alive_ = parser_->keep_alive();
  parser_.reset();
  hold(static_cast<int64_t>(request.body.size()));
  call(std::move(request));
}

void Connection::call(HttpRequest request) {
  phase_ = Phase::kCall;
  stream_.expires_never();
  counted_waiting_ = true;
  ++registry_->gauges.waiting;
  std::weak_ptr<Connection> weak = weak_from_this();
  auto executor = stream_.get_executor();
  auto done = [weak, executor](HttpReply reply) {
    if (auto self = weak.lock())
      net::post(executor, [self, reply = std::move(reply)]() mutable { self->on_reply(std::move(reply)); });
  };
  call_ = registry_->handler.on_request(std::move(request), std::move(done));
  if (!call_) return;  // answered already; the reply is posted
  ++deadline_gen_;
  timer_.expires_at(call_->deadline());
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && self->phase_ == Phase::kCall && self->call_) self->call_->expire();
  });
  watch();
}

// While a call runs, read the socket: a pipelined request is kept in the buffer; an end of
// stream or a reset means the client went away, and its call is abandoned (cancelled).
void Connection::watch() {
  if (buffer_.size() >= buffer_.max_size()) return;  // full of pipelined requests: stop reading
  watching_ = true;
  const size_t room = std::min(kIdleRead, buffer_.max_size() - buffer_.size());
  stream_.async_read_some(buffer_.prepare(room), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->on_watch(ec, n);
  });
}

void Connection::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  buffer_.commit(n);
  if (phase_ != Phase::kCall) return;
  if (pending_reply_) {  // the reply came while this read was pending (and cancelled it)
    HttpReply r = std::move(*pending_reply_);
    pending_reply_.reset();
    return write(std::move(r), false);
  }
  if (ec) {
    if (call_) call_->abandon();
    call_.reset();
    return close();
  }
  watch();
}

void Connection::on_reply(HttpReply reply) {
  if (phase_ != Phase::kCall) return;
  disarm_deadline();
  if (watching_) {
    pending_reply_ = std::move(reply);
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // on_watch writes it
    return;
  }
  write(std::move(reply), false);
}

void Connection::refuse(const Refusal& r, const HttpRequest* head) {
  write(registry_->handler.refusal(r.limit, r.status, r.message, head), true);
}

void Connection::write(HttpReply reply, bool close_after) {
  phase_ = Phase::kWrite;
  call_.reset();
  if (registry_->draining) close_after = true;
  close_after = close_after || !keep_alive_;
  if (reply.stream) return write_stream(std::move(reply), close_after);
  auto res = std::make_shared<http::response<http::string_body>>();
  res->version(11);
  res->result(static_cast<unsigned>(reply.status));
  res->set(http::field::server, "stave");
  for (auto& [k, v] : reply.headers) res->insert(k, v);
  if (!reply.content_type.empty()) res->set(http::field::content_type, reply.content_type);
  res->body() = std::move(reply.body);
  res->keep_alive(!close_after);
  res->prepare_payload();
  response_ = res;
  stream_.expires_after(ms(registry_->limits.write_timeout_ms));
  http::async_write(stream_, *res, [self = shared_from_this(), close_after](beast::error_code ec, size_t) {
    self->on_write(ec, close_after);
  });
}

void Connection::on_write(beast::error_code ec, bool close_after) {
  response_.reset();
  if (counted_waiting_) {
    counted_waiting_ = false;
    --registry_->gauges.waiting;
  }
  hold(-held_);
  if (ec) return close();
  if (close_after) return linger();
  read_idle();
}

// A streamed body: the head with Transfer-Encoding: chunked, then each piece the producer
// buffered as one chunk, one write at a time (the producer blocks while the stream is full),
// then the last chunk. A write error or a write deadline closes the connection, which closes
// the stream and so stops the producer.
void Connection::write_stream(HttpReply reply, bool close_after) {
  auto res = std::make_shared<http::response<http::empty_body>>();
  res->version(11);
  res->result(static_cast<unsigned>(reply.status));
  res->set(http::field::server, "stave");
  for (auto& [k, v] : reply.headers) res->insert(k, v);
  if (!reply.content_type.empty()) res->set(http::field::content_type, reply.content_type);
  res->keep_alive(!close_after);
  res->chunked(true);
  body_stream_ = std::move(reply.stream);
  // The stream holds the connection while it waits for the producer (no read or write is
  // pending then); the cycle ends when the stream ends or is closed (both clear the notify).
  body_stream_->set_notify([self = shared_from_this(), close_after] {
    net::post(self->stream_.get_executor(), [self, close_after] { self->stream_next(close_after); });
  });
  auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
  stream_writing_ = true;
  stream_.expires_after(ms(registry_->limits.write_timeout_ms));
  http::async_write_header(stream_, *sr, [self = shared_from_this(), res, sr, close_after](beast::error_code ec, size_t) {
    self->stream_writing_ = false;
    if (ec) return self->on_write(ec, close_after);
    self->stream_next(close_after);
  });
}

void Connection::stream_next(bool close_after) {
  if (phase_ != Phase::kWrite || stream_writing_ || !body_stream_) return;
  HttpStream::Piece p = body_stream_->take();
  if (p.bytes.empty() && !p.ended) {
    stream_.expires_never();  // waiting for the producer, not for the client
    return;
  }
  chunk_out_.clear();
  if (!p.bytes.empty()) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", p.bytes.size());
    chunk_out_ += size;
    chunk_out_ += p.bytes;
    chunk_out_ += "\r\n";
  }
  if (p.ended) chunk_out_ += "0\r\n\r\n";
  stream_writing_ = true;
  stream_.expires_after(ms(registry_->limits.write_timeout_ms));
  net::async_write(stream_, net::buffer(chunk_out_),
                   [self = shared_from_this(), close_after, ended = p.ended](beast::error_code ec, size_t) {
                     self->stream_writing_ = false;
                     if (ec || ended) {
                       if (self->body_stream_) self->body_stream_->close();
                       self->body_stream_.reset();
                       return self->on_write(ec, close_after);
                     }
                     self->stream_next(close_after);
                   });
}

// After a reply that closes: stop sending, then read and drop what the client still sends
// (the rest of a refused body) for a bounded time, so it reads our reply instead of a reset.
void Connection::linger() {
  phase_ = Phase::kLinger;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(ms(registry_->limits.linger_ms));
  linger_read();
}

void Connection::linger_read() {
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec || self->phase_ != Phase::kLinger) return self->close();
    self->linger_read();
  });
}

void Connection::close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  if (body_stream_) body_stream_->close();
  body_stream_.reset();
  if (call_) call_->abandon();
  call_.reset();
  timer_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace stave::server
