#include "server/http_parse.h"

#include <fmt/format.h>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

namespace stave::server {
namespace http = boost::beast::http;

const char* to_string(HttpLimit limit) {
  switch (limit) {
    case HttpLimit::kHeaderBytes: return "header_bytes";
    case HttpLimit::kHeaderFields: return "header_fields";
    case HttpLimit::kRequestLine: return "request_line";
    case HttpLimit::kBodyBytes: return "body_bytes";
    case HttpLimit::kHeaderTimeout: return "header_timeout";
    case HttpLimit::kBodyTimeout: return "body_timeout";
    case HttpLimit::kFraming: return "framing";
    case HttpLimit::kConnections: return "connections";
    case HttpLimit::kConnectionsPerAddress: return "connections_per_address";
    case HttpLimit::kFileDescriptors: return "file_descriptors";
    case HttpLimit::kJsonValues: return "json_values";
  }
  return "unknown";
}

void configure_parser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.header_bytes, UINT32_MAX)));
  parser.body_limit(limits.max_body_bytes);
}

namespace {

Refusal framing(std::string message) { return {HttpLimit::kFraming, 400, std::move(message)}; }

bool has_control_character(std::string_view v) {
  for (unsigned char c : v)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  return false;
}

}  // namespace

std::optional<Refusal> check_head(const RequestParser& parser, const HttpLimits& limits) {
  const auto& req = parser.get();
  const size_t line = req.method_string().size() + 1 + req.target().size() + 1 + 8;
  if (line > limits.request_line_bytes)
    return Refusal{HttpLimit::kRequestLine, 414,
                   fmt::format("the request line is over the server's limit of {} bytes", limits.request_line_bytes)};
  if (req.version() != 11 && req.version() != 10)
    return framing(fmt::format("HTTP version {}.{} is not served (HTTP/1.1 and 1.0 are)", req.version() / 10,
                               req.version() % 10));
  size_t fields = 0, lengths = 0, encodings = 0, hosts = 0;
  for (const auto& f : req) {
    ++fields;
    if (has_control_character(f.value()))
      return framing(fmt::format("header field {} has a control character in its value",
                                 std::string(f.name_string())));
    if (f.name() == http::field::content_length) {
      ++lengths;
      if (f.value().find(',') != boost::beast::string_view::npos)
        return framing("Content-Length must be one decimal number");
    }
    if (f.name() == http::field::transfer_encoding) ++encodings;
    if (f.name() == http::field::host) ++hosts;
  }
  if (fields > limits.header_fields)
    return Refusal{HttpLimit::kHeaderFields, 431,
                   fmt::format("{} header fields are over the server's limit of {}", fields, limits.header_fields)};
  if (lengths > 1) return framing("more than one Content-Length");
  if (encodings > 1) return framing("more than one Transfer-Encoding");
  if (encodings == 1 && lengths == 1) return framing("both Content-Length and Transfer-Encoding");
  if (encodings == 1 && !boost::beast::iequals(req[http::field::transfer_encoding], "chunked"))
    return framing("the only Transfer-Encoding served is chunked");
  if (hosts > 1) return framing("more than one Host");
  if (req.version() == 11 && hosts == 0) return framing("an HTTP/1.1 request needs a Host header");
  return std::nullopt;
}

std::optional<Refusal> set_body_limit(RequestParser& parser, size_t limit) {
  if (auto n = parser.content_length(); n && *n > limit)
    return Refusal{HttpLimit::kBodyBytes, 413,
                   fmt::format("the request body of {} bytes is over this route's limit of {} bytes", *n, limit)};
  parser.body_limit(limit);
  return std::nullopt;
}

std::optional<Refusal> refusal_for(const boost::beast::error_code& ec, bool reading_body, bool any_bytes,
                                   const HttpLimits& limits) {
  if (ec == boost::beast::error::timeout) {
    if (!any_bytes) return std::nullopt;
    return reading_body ? Refusal{HttpLimit::kBodyTimeout, 408,
                                  fmt::format("the body was not received within {} ms", limits.body_timeout_ms)}
                        : Refusal{HttpLimit::kHeaderTimeout, 408,
                                  fmt::format("the request head was not received within {} ms",
                                              limits.header_timeout_ms)};
  }
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
    return Refusal{HttpLimit::kHeaderBytes, 431,
                   fmt::format("the request head is over the server's limit of {} bytes", limits.header_bytes)};
  if (ec == http::error::body_limit)
    return Refusal{HttpLimit::kBodyBytes, 413, "the request body is over this route's limit"};
  // The peer closed or reset: nothing to answer.
  if (ec == http::error::end_of_stream || ec == boost::asio::error::eof ||
      ec == boost::asio::error::connection_reset || ec == boost::asio::error::operation_aborted ||
      ec == boost::asio::error::broken_pipe)
    return std::nullopt;
  if (ec == http::error::partial_message) {
    if (!any_bytes) return std::nullopt;
    return framing(reading_body ? "the body ended before its declared length" : "the request head is incomplete");
  }
  return framing("malformed request: " + ec.message());
}

HttpRequest head_of(const RequestParser& parser, const std::string& remote) {
  const auto& req = parser.get();
  HttpRequest out;
  out.method = std::string(req.method_string());
  out.target = std::string(req.target());
  out.path = out.target.substr(0, out.target.find('?'));
  out.remote = remote;
  for (const auto& f : req) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (boost::beast::iequals(k, name)) return v;
  return {};
}

}  // namespace stave::server
