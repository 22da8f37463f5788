// The event-driven HTTP/1.1 transport of stave serve, on Boost.Beast + Boost.Asio: a few I/O
// threads accept, read, parse and write for every connection; an idle or slow connection costs
// a socket and a small buffer, never a thread. Requests go to an HttpHandler
// (server/http_exchange.h); decisions run on the admission queue's workers and come back
// through HttpCall. Limits and deadlines: server/http_limits.h.
//
// Lifecycle: bind() → run() (blocks on the I/O threads) → drain() from any thread: the listener
// takes in what is already in the kernel's backlog and closes; every later reply says
// Connection: close; idle keep-alive connections get drain_grace_ms to send a last request;
// run() returns once every connection has been answered and closed.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_exchange.h"
#include "server/http_limits.h"

namespace stave::server {

// What /metrics shows of the transport (sampled).
struct HttpGauges {
  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> waiting{0};          // requests read whole, reply not yet written
  std::atomic<int64_t> bytes_in_flight{0};  // request bytes held (heads and bodies not yet answered)
};

class HttpServer {
 public:
  HttpServer(const HttpLimits& limits, HttpHandler& handler, HttpGauges& gauges);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Throws stave::Error(kIo) when the address cannot be bound; returns the port.
  int bind(const std::string& host, int port);
  void run();
  void drain();  // thread-safe, idempotent

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Raises this process's open-file limit to its hard limit (each connection is a descriptor).
// Returns the soft limit now in force.
uint64_t raise_open_file_limit();

}  // namespace stave::server
