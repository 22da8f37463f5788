// What one HTTP connection may cost before the server refuses it. Every limit is enforced
// before the memory it guards is allocated: the header parser stops at header_bytes, a
// Content-Length over the route's body limit is refused before any body byte is read, a chunked
// body is cut at the limit, and JSON bodies stop at max_json_values (server/systemone_body.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace stave::server {

struct HttpLimits {
  // The head: request line + header fields (431 / 414 when over).
  size_t header_bytes = 16 * 1024;
  size_t header_fields = 100;
  size_t request_line_bytes = 8 * 1024;
  // The largest body any route takes (the server sets it from its routes). Beast checks a
  // Content-Length against it as the head completes; each route's own limit is checked next.
  size_t max_body_bytes = 0;
  // Deadlines, in milliseconds. header: from the request's first byte to its last header line;
  // body: for the whole body; idle: a keep-alive connection waiting for its next request;
  // write: for the whole reply; linger: reading (and dropping) what a refused client still
  // sends after the reply, so it sees the reply rather than a reset.
  int header_timeout_ms = 10'000;
  int body_timeout_ms = 60'000;
  int idle_timeout_ms = 30'000;
  int write_timeout_ms = 30'000;
  int linger_ms = 1'000;
  // After stop(): how long idle keep-alive connections stay open, so a request a client sent
  // as the drain began is answered (503 draining) instead of meeting a closed socket.
  int drain_grace_ms = 1'000;
  // Connections: over max_connections (all clients) or max_connections_per_address (one peer
  // address), a new connection gets a 503 and is closed at once. 0: no limit.
  size_t max_connections = 4096;
  size_t max_connections_per_address = 256;
  // Threads running the event loop (accept, read, parse, write); decisions run on the
  // admission queue's workers.
  int io_threads = 2;
};

// Which limit refused a request or connection (the `limit` label of
// stave_http_refused_total).
enum class HttpLimit {
  kHeaderBytes,
  kHeaderFields,
  kRequestLine,
  kBodyBytes,
  kHeaderTimeout,
  kBodyTimeout,
  kFraming,
  kConnections,
  kConnectionsPerAddress,
  kFileDescriptors,
  kJsonValues,
};

const char* to_string(HttpLimit limit);

}  // namespace stave::server
