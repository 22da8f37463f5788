// parse_sha256sums (a release's SHA256SUMS) on arbitrary bytes: it must either throw
// stave::Error or return entries whose digest is 64 lowercase hex digits and whose file name is
// a relative path without "..", as verify_sha256sums joins it to the release folder.
// Seeds: the fixture releases' SHA256SUMS (fuzz/corpus/fuzz_sha256sums/).
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/checksums.h"
#include "stave/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const stave::ChecksumEntry& e : stave::parse_sha256sums(text, "SHA256SUMS")) {
      if (e.expected.size() != 64) std::abort();
      for (char c : e.expected)
        if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) std::abort();
      if (e.file.empty() || e.file[0] == '/' || e.file.find("..") != std::string::npos) std::abort();
      if (e.file.size() > stave::kMaxChecksumNameBytes) std::abort();
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
