// What the process holds in memory, from the kernel's own accounting (Linux /proc).
#pragma once
#include <cstdint>
#include <string>

namespace stave::measure {

// Peak resident set size of this process so far (VmHWM), in bytes; 0 where /proc is missing.
uint64_t peak_rss_bytes();

struct MappedBytes {
  uint64_t mapped = 0;    // bytes of file mappings under the folder
  uint64_t resident = 0;  // of those, bytes resident in this process (pages touched and present)
};
// File mappings of this process whose path lies under `dir` (the model's weights), from
// /proc/self/smaps.
MappedBytes mapped_under(const std::string& dir);

}  // namespace stave::measure
