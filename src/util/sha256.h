// SHA-256 of files and buffers (OpenSSL EVP), as lowercase hex.
#pragma once
#include <cstddef>
#include <string>

namespace stave {

std::string sha256_hex(const void* data, size_t size);
std::string sha256_file_hex(const std::string& path);  // streams the file; throws stave::Error

}  // namespace stave
