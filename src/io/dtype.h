// Element types of tensors as safetensors names them.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace stave {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU64, kU32, kU16, kU8, kBool, kF8E4M3, kF8E5M2, kE8M0 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                       // "BF16", ...
std::optional<DType> parse_dtype(std::string_view name);    // safetensors spelling

}  // namespace stave
