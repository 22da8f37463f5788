// parse_request_bytes (server/http_parse.h): the connection's read steps on a byte string.
#pragma once
#include <boost/asio/buffer.hpp>

namespace stave::server {

template <class RouteLimit>
ParsedRequest parse_request_bytes(std::string_view bytes, const HttpLimits& limits, RouteLimit route_limit) {
  ParsedRequest out;
  RequestParser parser;
  configure_parser(parser, limits);
  parser.eager(false);
  boost::beast::error_code ec;
  // Head.
  while (!ec && !parser.is_header_done()) {
    const size_t n = parser.put(boost::asio::buffer(bytes.data() + out.consumed, bytes.size() - out.consumed), ec);
    out.consumed += n;
    if (ec == boost::beast::http::error::need_more && n > 0 && out.consumed < bytes.size()) {
      ec = {};  // Beast took some lines; feed it the rest
      continue;
    }
    if (ec == boost::beast::http::error::need_more || (n == 0 && !ec)) {
      // The connection would wait for more; in memory the request ends here.
      out.refusal = refusal_for(boost::beast::http::error::partial_message, false, out.consumed > 0, limits);
      return out;
    }
  }
  if (ec) {
    out.refusal = refusal_for(ec, false, true, limits);
    return out;
  }
  if ((out.refusal = check_head(parser, limits))) return out;
  const HttpRequest head = head_of(parser, "fuzz");
  if ((out.refusal = set_body_limit(parser, route_limit(head)))) return out;
  // Body.
  while (!ec && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(bytes.data() + out.consumed, bytes.size() - out.consumed), ec);
    out.consumed += n;
    if (ec == boost::beast::http::error::need_more || (n == 0 && !ec)) {
      ec = {};
      if (n == 0 || out.consumed >= bytes.size()) {  // no more bytes will come: the stream ends here
        parser.put_eof(ec);
        if (ec || !parser.is_done()) {
          out.refusal = refusal_for(ec ? ec : boost::beast::http::error::partial_message, true, true, limits);
          return out;
        }
        break;
      }
    }
  }
  if (ec) {
    out.refusal = refusal_for(ec, true, true, limits);
    return out;
  }
  out.request = head;
  out.request->body = std::move(parser.get().body());
  out.keep_alive = parser.keep_alive();
  return out;
}

}  // namespace stave::server
