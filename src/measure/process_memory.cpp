#include "measure/process_memory.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace stave::measure {

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:  123 kB"
  return 0;
}

MappedBytes mapped_under(const std::string& dir) {
  std::error_code ec;
  std::string root = std::filesystem::weakly_canonical(dir, ec).string();
  if (ec || root.empty()) root = dir;
  if (root.back() != '/') root += '/';
  MappedBytes out;
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    // A mapping header: "start-end perms offset dev inode   path"; fields follow as "Key: N kB".
    const size_t colon = line.find(':');
    const bool field = colon != std::string::npos && colon < line.find(' ') && line.find('-') > colon;
    if (!field) {
      const size_t slash = line.find('/');
      inside = slash != std::string::npos && line.compare(slash, root.size(), root) == 0;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("Size:", 0) == 0) out.mapped += std::stoull(line.substr(5)) * 1024;
    else if (line.rfind("Rss:", 0) == 0) out.resident += std::stoull(line.substr(4)) * 1024;
  }
  return out;
}

}  // namespace stave::measure
