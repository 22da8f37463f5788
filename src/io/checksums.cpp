#include "io/checksums.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "stave/errors.h"
#include "util/mapped_file.h"
#include "util/sha256.h"

namespace stave {
namespace fs = std::filesystem;

std::vector<ChecksumEntry> parse_sha256sums(const std::string& text, const std::string& label) {
  if (text.size() > kMaxChecksumsBytes)
    throw Error(ErrorKind::kInvalidModel, label + " is " + std::to_string(text.size()) +
                                              " bytes, larger than the limit of " + std::to_string(kMaxChecksumsBytes));
  std::vector<ChecksumEntry> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto bad = [&] { throw Error(ErrorKind::kInvalidModel, label + " line " + std::to_string(n) + " is not \"<sha256>  <file>\""); };
    if (line.size() < 66 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*')) bad();
    std::string hex = line.substr(0, 64);
    for (char& c : hex) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) bad();
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    std::string file = line.substr(66);
    if (file.size() > kMaxChecksumNameBytes)
      throw Error(ErrorKind::kInvalidModel, label + " line " + std::to_string(n) + " names a file longer than " +
                                                std::to_string(kMaxChecksumNameBytes) + " bytes");
    if (file.empty() || file.find("..") != std::string::npos || file[0] == '/')
      throw Error(ErrorKind::kInvalidModel, label + " line " + std::to_string(n) + " names an unsafe path");
    out.push_back({file, hex});
  }
  return out;
}

std::vector<ChecksumResult> verify_sha256sums(const std::string& dir, void (*progress)(const std::string&, void*),
                                              void* ctx) {
  fs::path sums = fs::path(dir) / "SHA256SUMS";
  if (!fs::exists(sums)) throw Error(ErrorKind::kInvalidModel, "model folder " + dir + " has no SHA256SUMS");
  auto entries = parse_sha256sums(read_file(sums.string(), kMaxChecksumsBytes), sums.string());
  std::vector<ChecksumResult> out;
  for (const auto& e : entries) {
    if (progress) progress(e.file, ctx);
    fs::path p = fs::path(dir) / e.file;
    if (!fs::exists(p)) {
      out.push_back({e.file, ChecksumResult::Status::kMissing, ""});
      continue;
    }
    std::string actual = sha256_file_hex(p.string());
    out.push_back({e.file, actual == e.expected ? ChecksumResult::Status::kOk : ChecksumResult::Status::kMismatch, actual});
  }
  return out;
}

void write_sha256sums(const std::string& dir, std::vector<std::string> files) {
  std::sort(files.begin(), files.end());
  // The files are hashed concurrently (a 27B release is a few 5 GB shards; one core hashes
  // about 1 GB/s), one per OpenMP thread at a time.
  std::vector<std::string> sums(files.size());
  std::vector<std::exception_ptr> errors(files.size());
  const int64_t n = static_cast<int64_t>(files.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      sums[i] = sha256_file_hex((fs::path(dir) / files[i]).string());
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  std::ostringstream ss;
  for (size_t i = 0; i < files.size(); ++i) ss << sums[i] << "  " << files[i] << "\n";
  std::ofstream out(fs::path(dir) / "SHA256SUMS", std::ios::trunc);
  out << ss.str();
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + (fs::path(dir) / "SHA256SUMS").string());
}

}  // namespace stave
