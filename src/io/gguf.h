// GGUF (version 3), the file format of llama.cpp/ggml: constants shared by our writer and
// reader. Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
// (key string, u32 value type, value), the tensor infos (name, u32 n_dims, u64 ne[n_dims]
// innermost first, u32 ggml type, u64 offset into the data section), padding to the
// alignment, then the data section (each tensor's offset a multiple of the alignment).
// Strings are u64 length + bytes, little-endian throughout.
#pragma once
#include <cstdint>
#include <string>

namespace stave::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kDefaultAlignment = 32;  // "general.alignment" when absent

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// The ggml tensor types we write (ggml.h numbering).
enum class TensorType : uint32_t { kF32 = 0, kF16 = 1, kBF16 = 30, kMXFP4 = 39 };

// MXFP4 block (ggml-common.h block_mxfp4): { u8 e; u8 qs[16]; } for 32 values; qs[j] holds
// element j in its low nibble and element j+16 in its high nibble.
inline constexpr int64_t kMxfp4BlockValues = 32;
inline constexpr int64_t kMxfp4BlockBytes = 17;

const char* tensor_type_name(TensorType t);
// Bytes of a row of `ne0` values; throws stave::Error(kInvalidRequest) when ne0 does not fit
// the type's block (MXFP4: a multiple of 32) or the type is not one of ours.
uint64_t row_bytes(TensorType t, int64_t ne0);

}  // namespace stave::gguf
