#include "server/auth.h"

#include <cctype>

namespace stave::server {

bool bearer_token_matches(const std::string& header, const std::string& api_key) {
  static const std::string kScheme = "bearer ";
  if (api_key.empty() || header.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  size_t start = kScheme.size();
  while (start < header.size() && header[start] == ' ') ++start;
  size_t end = header.size();
  while (end > start && (header[end - 1] == ' ' || header[end - 1] == '\t')) --end;
  const size_t n = end - start;
  // Constant time over the key: always walk the whole key.
  unsigned diff = static_cast<unsigned>(n != api_key.size());
  for (size_t i = 0; i < api_key.size(); ++i) {
    const unsigned char a = i < n ? static_cast<unsigned char>(header[start + i]) : 0;
    diff |= a ^ static_cast<unsigned char>(api_key[i]);
  }
  return diff == 0;
}

}  // namespace stave::server
