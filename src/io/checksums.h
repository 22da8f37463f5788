// SHA256SUMS files (the `sha256sum` format: "<hex>  <name>" per line).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace stave {

struct ChecksumEntry {
  std::string file;
  std::string expected;
};

struct ChecksumResult {
  std::string file;
  enum class Status { kOk, kMismatch, kMissing } status;
  std::string actual;  // empty when missing
};

// Limits: the whole file, and one file name (a release lists a dozen files).
inline constexpr size_t kMaxChecksumsBytes = size_t{1} << 20;
inline constexpr size_t kMaxChecksumNameBytes = 4096;

// Parses SHA256SUMS text; throws stave::Error(kInvalidModel) naming a malformed line.
std::vector<ChecksumEntry> parse_sha256sums(const std::string& text, const std::string& label);

// Checks every file listed in dir/SHA256SUMS. `progress` is called before each file.
std::vector<ChecksumResult> verify_sha256sums(const std::string& dir,
                                              void (*progress)(const std::string& file, void* ctx) = nullptr,
                                              void* ctx = nullptr);

// Writes dir/SHA256SUMS for the given files (names relative to dir), sorted by name.
void write_sha256sums(const std::string& dir, std::vector<std::string> files);

}  // namespace stave
