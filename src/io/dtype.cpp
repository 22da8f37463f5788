#include "io/dtype.h"

#include <array>
#include <utility>

namespace stave {
namespace {
struct Entry {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<Entry, 16> kTypes{{
    {DType::kF64, "F64", 8},     {DType::kF32, "F32", 4},       {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},   {DType::kI64, "I64", 8},       {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},     {DType::kI8, "I8", 1},         {DType::kU64, "U64", 8},
    {DType::kU32, "U32", 4},     {DType::kU16, "U16", 2},       {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},   {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kE8M0, "F8_E8M0", 1},
}};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& e : kTypes)
    if (e.name == name) return e.type;
  return std::nullopt;
}

}  // namespace stave
