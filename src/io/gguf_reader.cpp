#include "io/gguf_reader.h"

#include <cstring>

#include "stave/errors.h"

namespace stave::gguf {
namespace {

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::kInvalidModel, path_ + ": not a valid GGUF file: " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  template <typename T>
  T get() {
    if (n_ - pos_ < sizeof(T)) fail("truncated");
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t len = get<uint64_t>();
    if (len > kMaxStringBytes)
      fail("a string of " + std::to_string(len) + " bytes, more than the limit of " + std::to_string(kMaxStringBytes));
    if (len > n_ - pos_) fail("a string runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  const std::string& path_;
};

nlohmann::json scalar(Cursor& c, ValueType t) {
  switch (t) {
    case ValueType::kUint8: return c.get<uint8_t>();
    case ValueType::kInt8: return c.get<int8_t>();
    case ValueType::kUint16: return c.get<uint16_t>();
    case ValueType::kInt16: return c.get<int16_t>();
    case ValueType::kUint32: return c.get<uint32_t>();
    case ValueType::kInt32: return c.get<int32_t>();
    case ValueType::kFloat32: return c.get<float>();
    case ValueType::kBool: {
      uint8_t b = c.get<uint8_t>();
      if (b > 1) c.fail("a bool is neither 0 nor 1");
      return b == 1;
    }
    case ValueType::kString: return c.str();
    case ValueType::kUint64: return c.get<uint64_t>();
    case ValueType::kInt64: return c.get<int64_t>();
    case ValueType::kFloat64: return c.get<double>();
    case ValueType::kArray: break;
  }
  c.fail("unknown metadata value type " + std::to_string(static_cast<uint32_t>(t)));
}

bool known_tensor_type(uint32_t t) { return t == 0 || t == 1 || t == 30 || t == 39; }

}  // namespace

File::File(const std::string& path) : map_(path), layout_(parse_layout(map_.data(), map_.size(), path)) {}

Layout parse_layout(const uint8_t* bytes, size_t size, const std::string& path) {
  Layout out;
  uint32_t& version_ = out.version;
  uint32_t& alignment_ = out.alignment;
  std::vector<MetadataEntry>& metadata_ = out.metadata;
  std::vector<TensorEntry>& tensors_ = out.tensors;
  Cursor c(bytes, size, path);
  if (c.get<uint32_t>() != kMagic) c.fail("bad magic (expected \"GGUF\")");
  version_ = c.get<uint32_t>();
  if (version_ != 2 && version_ != 3) c.fail("unsupported version " + std::to_string(version_));
  const uint64_t n_tensors = c.get<uint64_t>();
  const uint64_t n_kv = c.get<uint64_t>();
  if (n_tensors > kMaxTensors) c.fail(std::to_string(n_tensors) + " tensors, more than the limit of " + std::to_string(kMaxTensors));
  if (n_kv > kMaxMetadata)
    c.fail(std::to_string(n_kv) + " metadata entries, more than the limit of " + std::to_string(kMaxMetadata));
  // Each entry takes at least 8 bytes: a count beyond the file size is a lie, not a big file.
  if (n_tensors > c.remaining() / 8 || n_kv > c.remaining() / 8) c.fail("entry counts larger than the file");
  for (uint64_t i = 0; i < n_kv; ++i) {
    MetadataEntry e;
    e.key = c.str();
    e.type = static_cast<ValueType>(c.get<uint32_t>());
    if (e.type == ValueType::kArray) {
      e.array_type = static_cast<ValueType>(c.get<uint32_t>());
      if (e.array_type == ValueType::kArray) c.fail("nested arrays are not supported");
      const uint64_t n = c.get<uint64_t>();
      if (n > kMaxArrayLength)
        c.fail("array \"" + e.key + "\" has " + std::to_string(n) + " elements, more than the limit of " +
               std::to_string(kMaxArrayLength));
      if (n > c.remaining()) c.fail("array \"" + e.key + "\" is longer than the file");
      e.value = nlohmann::json::array();
      for (uint64_t j = 0; j < n; ++j) e.value.push_back(scalar(c, e.array_type));
    } else {
      e.value = scalar(c, e.type);
    }
    if (e.key == "general.alignment") {
      if (e.type != ValueType::kUint32) c.fail("general.alignment must be a u32");
      alignment_ = e.value.get<uint32_t>();
      if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) c.fail("general.alignment is not a power of two");
    }
    metadata_.push_back(std::move(e));
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorEntry t;
    t.name = c.str();
    const uint32_t nd = c.get<uint32_t>();
    if (nd < 1 || nd > 4) c.fail("tensor \"" + t.name + "\" has " + std::to_string(nd) + " dimensions");
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t v = c.get<uint64_t>();
      if (v < 1 || v > (uint64_t{1} << 40)) c.fail("tensor \"" + t.name + "\" has a bad dimension");
      t.ne.push_back(static_cast<int64_t>(v));
    }
    const uint32_t type = c.get<uint32_t>();
    if (!known_tensor_type(type)) c.fail("tensor \"" + t.name + "\" has a ggml type this reader does not know (" + std::to_string(type) + ")");
    t.type = static_cast<TensorType>(type);
    t.offset = c.get<uint64_t>();
    try {
      t.nbytes = row_bytes(t.type, t.ne[0]);
    } catch (const Error& e) {
      c.fail("tensor \"" + t.name + "\": " + e.what());
    }
    for (size_t d = 1; d < t.ne.size(); ++d) {
      const uint64_t dim = static_cast<uint64_t>(t.ne[d]);
      if (t.nbytes > UINT64_MAX / dim) c.fail("tensor \"" + t.name + "\" has a byte size that overflows");
      t.nbytes *= dim;
    }
    tensors_.push_back(std::move(t));
  }
  out.data_offset = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_offset_ = out.data_offset;
  for (const auto& t : tensors_) {
    if (t.offset % alignment_ != 0) c.fail("tensor \"" + t.name + "\" is not aligned to " + std::to_string(alignment_));
    if (data_offset_ > size || t.offset > size - data_offset_ || t.nbytes > size - data_offset_ - t.offset)
      c.fail("tensor \"" + t.name + "\" runs past the end of the file");
  }
  return out;
}

const MetadataEntry* File::find(const std::string& key) const {
  for (const auto& e : layout_.metadata)
    if (e.key == key) return &e;
  return nullptr;
}

const TensorEntry* File::find_tensor(const std::string& name) const {
  for (const auto& t : layout_.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace stave::gguf
