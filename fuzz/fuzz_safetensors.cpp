// parse_safetensors on arbitrary bytes: it must either throw stave::Error or return tensors
// whose bytes lie inside the buffer and match dtype x shape. Anything else (a crash, a
// sanitizer report, another exception type, a broken invariant) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"
#include "stave/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto contents = stave::parse_safetensors(data, size, "fuzz input");
    for (const auto& t : contents.tensors) {
      if (t.nbytes > size || t.data < data || t.data + t.nbytes > data + size) std::abort();
      uint64_t numel = 1;
      for (int64_t d : t.shape) {
        if (d < 0) std::abort();
        numel *= static_cast<uint64_t>(d);
      }
      if (numel * stave::dtype_size(t.dtype) != t.nbytes) std::abort();
      // Touch the first and last byte so that a bad TensorRef shows up under AddressSanitizer.
      if (t.nbytes > 0) {
        volatile uint8_t first = t.data[0], last = t.data[t.nbytes - 1];
        (void)first;
        (void)last;
      }
    }
  } catch (const stave::Error&) {
  }
  return 0;
}
