// Request parsing under HttpLimits on Boost.Beast's parser, shared by the connection
// (server/http_connection.cpp) and the libFuzzer target (fuzz/fuzz_http_request.cpp):
// configure the parser before a byte is read, check the head strictly once it is parsed, and
// map every parse error to the reply it gets. Strict framing (request smuggling): Beast refuses
// conflicting Content-Lengths, Content-Length with chunked, malformed lengths and bare CR/LF
// itself; check_head adds what it accepts (a repeated or list-valued Content-Length even when
// the values agree, a Transfer-Encoding other than "chunked", a repeated Host, control
// characters in field values).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http_exchange.h"
#include "server/http_limits.h"

namespace stave::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

struct Refusal {
  HttpLimit limit;
  int status;
  std::string message;
};

// Header limit and the largest body limit set; once the head is read, set_body_limit narrows it
// to the route's, before any body byte is buffered.
void configure_parser(RequestParser& parser, const HttpLimits& limits);
// The head, once parsed: framing and the request-line / field-count limits.
std::optional<Refusal> check_head(const RequestParser& parser, const HttpLimits& limits);
// A route's body limit: a Content-Length over it is refused before the body is read.
std::optional<Refusal> set_body_limit(RequestParser& parser, size_t limit);
// A parse or read error (`reading_body`: while the body was read). nullopt: the peer closed
// the connection between requests (nothing to answer).
std::optional<Refusal> refusal_for(const boost::beast::error_code& ec, bool reading_body, bool any_bytes,
                                   const HttpLimits& limits);
HttpRequest head_of(const RequestParser& parser, const std::string& remote);

// The transport's parse path on bytes in memory (the fuzzer): one request, read under the
// limits, with the body limit `route_limit(head)` gives. Either a request or a refusal.
struct ParsedRequest {
  std::optional<HttpRequest> request;
  std::optional<Refusal> refusal;
  size_t consumed = 0;  // bytes of `bytes` the request took (pipelining)
  bool keep_alive = false;
};
template <class RouteLimit>
ParsedRequest parse_request_bytes(std::string_view bytes, const HttpLimits& limits, RouteLimit route_limit);

}  // namespace stave::server

#include "server/http_parse_bytes.h"
