// API key check: "Authorization: Bearer <key>" (scheme case-insensitive, as RFC 7235 says).
#pragma once
#include <string>

namespace stave::server {

// True when `authorization_header` carries `api_key` as a bearer token. The key comparison
// takes the same time wherever the first difference is, so timing does not leak the key.
bool bearer_token_matches(const std::string& authorization_header, const std::string& api_key);

}  // namespace stave::server
