// Writes a checkpoint as Hugging Face shards: model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json, with tensors produced one at a time (never all in memory).
// The one writer of sharded releases, used by `stave quantize` and `stave synth`.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "io/safetensors_writer.h"

namespace stave {

struct ShardTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t id = 0;  // the caller's handle, passed back to `produce`
  uint64_t nbytes() const;
};

struct ShardedFiles {
  std::vector<std::string> files;  // the shards in order, then the index
  size_t shards = 0;
  uint64_t total_size = 0;  // bytes of tensor data (the index's metadata.total_size)
};

// `units` are groups of tensors that must share a file (a linear's codes and scales), in
// checkpoint order. Shards are cut as huggingface_hub cuts them: greedily in order, a new file
// when the next unit would pass `shard_bytes`, an oversized unit alone. Within a file wider
// types come first (as the safetensors library orders them), so every tensor's data stays
// aligned to its element size. The index is sorted by tensor name, indented 2, as transformers
// writes it. `produce(tensor, write)` must write exactly tensor.nbytes() bytes.
using ProduceShardTensor = std::function<void(const ShardTensor&, const SafetensorsWriter::WriteFn&)>;
ShardedFiles write_sharded_safetensors(const std::filesystem::path& out,
                                       const std::vector<std::vector<ShardTensor>>& units, uint64_t shard_bytes,
                                       const ProduceShardTensor& produce);

}  // namespace stave
