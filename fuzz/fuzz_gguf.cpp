// The GGUF reader (stave::gguf::parse_layout, what gguf::File runs on a mapped file) on
// arbitrary bytes: it must either throw stave::Error or describe tensors whose bytes lie inside
// the input, aligned as the file says, with metadata within the limits.
// Seeds: GGUFs written by `stave export-gguf` on the fixture release, cut down to a few tensors
// and a short vocabulary by fuzz/tools/trim_gguf.py (fuzz/corpus/fuzz_gguf/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/gguf_reader.h"
#include "stave/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const stave::gguf::Layout l = stave::gguf::parse_layout(data, size, "fuzz.gguf");
    if (l.alignment == 0 || (l.alignment & (l.alignment - 1)) != 0 || l.data_offset % l.alignment != 0) std::abort();
    if (l.tensors.size() > stave::gguf::kMaxTensors || l.metadata.size() > stave::gguf::kMaxMetadata) std::abort();
    for (const auto& t : l.tensors) {
      if (t.offset % l.alignment != 0) std::abort();
      if (l.data_offset > size || t.offset > size - l.data_offset || t.nbytes > size - l.data_offset - t.offset)
        std::abort();
      if (t.nbytes > 0) {  // the first and last byte, so that a bad range shows up under ASan
        volatile uint8_t first = data[l.data_offset + t.offset], last = data[l.data_offset + t.offset + t.nbytes - 1];
        (void)first;
        (void)last;
      }
    }
    for (const auto& m : l.metadata)
      if (m.value.is_array() && m.value.size() > stave::gguf::kMaxArrayLength) std::abort();
  } catch (const stave::Error&) {
  }
  return 0;
}
