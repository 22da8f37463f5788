// parse_safetensors_index (model.safetensors.index.json) on arbitrary bytes: it must either
// throw stave::Error or map plain shard file names (no '/', '\\', "." or "..", within the
// limits) to the tensors they hold, each tensor listed once.
// Seeds: the fixture releases' index files (fuzz/corpus/fuzz_safetensors_index/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "io/tensor_store.h"
#include "stave/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto by_file = stave::parse_safetensors_index(text, "model.safetensors.index.json");
    if (by_file.size() > stave::kMaxIndexShards) std::abort();
    std::set<std::string> seen;
    for (const auto& [file, names] : by_file) {
      if (file.empty() || file == "." || file == ".." || file.find_first_of("/\\") != std::string::npos) std::abort();
      if (names.empty()) std::abort();
      for (const auto& n : names)
        if (!seen.insert(n).second) std::abort();
    }
    if (seen.size() > stave::kMaxIndexTensors) std::abort();
  } catch (const stave::Error&) {
  }
  return 0;
}
