#include "server/http_server.h"

#include <sys/resource.h>

#include <thread>
#include <vector>

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "server/http_connection.h"
#include "stave/errors.h"

namespace stave::server {
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

uint64_t raise_open_file_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
    ::getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur;
}

struct HttpServer::Impl {
  Impl(const HttpLimits& l, HttpHandler& h, HttpGauges& g)
      : limits(l),
        registry(std::make_shared<ConnectionRegistry>(limits, h, g)),
        acceptor(ioc),
        retry(ioc),
        grace(ioc) {}

  void accept();
  void on_accept(error_code ec, tcp::socket socket);
  void refuse_connection(tcp::socket& socket, HttpLimit limit, const std::string& message);
  void admit(tcp::socket socket);
  void begin_drain();

  HttpLimits limits;
  net::io_context ioc;
  std::shared_ptr<ConnectionRegistry> registry;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // accept paused after running out of descriptors
  net::steady_timer grace;  // the drain grace
  bool drained = false;     // on the I/O threads only
};

HttpServer::HttpServer(const HttpLimits& limits, HttpHandler& handler, HttpGauges& gauges)
    : impl_(std::make_unique<Impl>(limits, handler, gauges)) {}

HttpServer::~HttpServer() = default;

// The kernel caps the backlog at net.core.somaxconn.
constexpr int kListenBacklog = 4096;

int HttpServer::bind(const std::string& host, int port) {
  Impl& m = *impl_;
  error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) throw Error(ErrorKind::kIo, fmt::format("cannot listen on {}: not an IP address", host));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  m.acceptor.open(endpoint.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(endpoint, ec);
  if (!ec) m.acceptor.listen(kListenBacklog, ec);
  if (ec)
    throw Error(ErrorKind::kIo, fmt::format("cannot listen on {}:{} ({})", host, port, ec.message()));
  return m.acceptor.local_endpoint().port();
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void HttpServer::Impl::on_accept(error_code ec, tcp::socket socket) {
  if (!acceptor.is_open() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors (EMFILE/ENFILE) or a transient error: pause instead of spinning.
    registry->handler.refusal(HttpLimit::kFileDescriptors, 503, "accept failed: " + ec.message(), nullptr);
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](error_code e) {
      if (!e && acceptor.is_open()) accept();
    });
    return;
  }
  admit(std::move(socket));
  accept();
}

void HttpServer::Impl::admit(tcp::socket socket) {
  error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  const std::string address = peer.address().to_string();
  if (auto over = registry->admit(address)) {
    refuse_connection(socket, *over,
                      *over == HttpLimit::kConnections
                          ? fmt::format("the server holds its limit of {} connections", limits.max_connections)
                          : fmt::format("{} holds its limit of {} connections", address,
                                        limits.max_connections_per_address));
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  std::make_shared<Connection>(std::move(socket), address, registry)->start();
}

// A connection over a limit: one short 503, written without waiting, then closed.
void HttpServer::Impl::refuse_connection(tcp::socket& socket, HttpLimit limit, const std::string& message) {
  HttpReply r = registry->handler.refusal(limit, 503, message, nullptr);
  std::string bytes = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nServer: stave\r\nConnection: close\r\nRetry-After: 1\r\n"
      "Content-Type: {}\r\nContent-Length: {}\r\n\r\n{}",
      r.content_type, r.body.size(), r.body);
  error_code ec;
  socket.non_blocking(true, ec);
  net::write(socket, net::buffer(bytes), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

void HttpServer::Impl::begin_drain() {
  if (drained) return;
  drained = true;
  registry->draining = true;
  // Take in what already waits in the kernel's backlog, so those clients are answered (with
  // Connection: close) rather than reset, then stop listening.
  error_code ec;
  acceptor.non_blocking(true, ec);
  for (;;) {
    tcp::socket s(net::make_strand(ioc));
    acceptor.accept(s, ec);
    if (ec) break;
    admit(std::move(s));
  }
  acceptor.close(ec);
  retry.cancel();
  if (registry->snapshot().empty()) return;  // nobody to wait for
  grace.expires_after(std::chrono::milliseconds(std::max(0, limits.drain_grace_ms)));
  grace.async_wait([this](error_code) {
    for (auto& c : registry->snapshot()) c->close_if_waiting();
  });
}

void HttpServer::run() {
  Impl& m = *impl_;
  m.accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, m.limits.io_threads); ++i) threads.emplace_back([&m] { m.ioc.run(); });
  m.ioc.run();
  for (auto& t : threads) t.join();
}

void HttpServer::drain() {
  net::post(impl_->ioc, [m = impl_.get()] { m->begin_drain(); });
}

}  // namespace stave::server
