#include "util/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "stave/errors.h"

namespace stave {
namespace {

struct Digest {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  Digest() {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
      throw Error(ErrorKind::kInternal, "OpenSSL SHA-256 init failed");
  }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx.get(), p, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &len);
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < len; ++i) {
      s.push_back(digits[md[i] >> 4]);
      s.push_back(digits[md[i] & 15]);
    }
    return s;
  }
};

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  Digest d;
  d.update(data, size);
  return d.hex();
}

std::string sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read " + path);
  Digest d;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) d.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(ErrorKind::kIo, "error while reading " + path);
  return d.hex();
}

}  // namespace stave
