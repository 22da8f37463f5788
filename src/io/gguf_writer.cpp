#include "io/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "stave/errors.h"

namespace stave::gguf {
namespace {

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.append(b, sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

const char* tensor_type_name(TensorType t) {
  switch (t) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kBF16: return "BF16";
    case TensorType::kMXFP4: return "MXFP4";
  }
  return "unknown";
}

uint64_t row_bytes(TensorType t, int64_t ne0) {
  if (ne0 < 1) throw Error(ErrorKind::kInvalidRequest, "GGUF tensor rows must hold at least one value");
  switch (t) {
    case TensorType::kF32: return static_cast<uint64_t>(ne0) * 4;
    case TensorType::kF16:
    case TensorType::kBF16: return static_cast<uint64_t>(ne0) * 2;
    case TensorType::kMXFP4:
      if (ne0 % kMxfp4BlockValues != 0)
        throw Error(ErrorKind::kInvalidRequest, "an MXFP4 GGUF row must be a multiple of 32 values, not " + std::to_string(ne0));
      return static_cast<uint64_t>(ne0 / kMxfp4BlockValues) * kMxfp4BlockBytes;
  }
  throw Error(ErrorKind::kInvalidRequest, "unsupported GGUF tensor type " + std::to_string(static_cast<uint32_t>(t)));
}

void Writer::key(const std::string& k, ValueType t) {
  put_string(kv_, k);
  put<uint32_t>(kv_, static_cast<uint32_t>(t));
  ++kv_count_;
}
void Writer::add_u32(const std::string& k, uint32_t v) { key(k, ValueType::kUint32); put(kv_, v); }
void Writer::add_u64(const std::string& k, uint64_t v) { key(k, ValueType::kUint64); put(kv_, v); }
void Writer::add_f32(const std::string& k, float v) { key(k, ValueType::kFloat32); put(kv_, v); }
void Writer::add_bool(const std::string& k, bool v) { key(k, ValueType::kBool); put<uint8_t>(kv_, v ? 1 : 0); }
void Writer::add_string(const std::string& k, const std::string& v) { key(k, ValueType::kString); put_string(kv_, v); }
void Writer::add_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  key(k, ValueType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(ValueType::kInt32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}
void Writer::add_string_array(const std::string& k, const std::vector<std::string>& v) {
  key(k, ValueType::kArray);
  put<uint32_t>(kv_, static_cast<uint32_t>(ValueType::kString));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
}

size_t Writer::add_tensor(const std::string& name, std::vector<int64_t> ne, TensorType type) {
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(ErrorKind::kInvalidRequest, "GGUF tensor \"" + name + "\" declared twice");
  if (ne.empty() || ne.size() > 4) throw Error(ErrorKind::kInvalidRequest, "GGUF tensor \"" + name + "\" needs 1 to 4 dimensions");
  uint64_t n = row_bytes(type, ne[0]);
  for (size_t i = 1; i < ne.size(); ++i) {
    if (ne[i] < 1) throw Error(ErrorKind::kInvalidRequest, "GGUF tensor \"" + name + "\" has an empty dimension");
    n *= static_cast<uint64_t>(ne[i]);
  }
  tensors_.push_back({name, std::move(ne), type, n, 0});
  return tensors_.size() - 1;
}

void Writer::write(const std::string& path, const ProduceFn& produce, uint32_t alignment) const {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error(ErrorKind::kInvalidRequest, "GGUF alignment must be a power of two");
  std::string head;
  put<uint32_t>(head, kMagic);
  put<uint32_t>(head, kVersion);
  put<uint64_t>(head, tensors_.size());
  std::string kv = kv_;
  uint64_t kv_count = kv_count_;
  if (alignment != kDefaultAlignment) {  // readers assume 32 unless told
    put_string(kv, "general.alignment");
    put<uint32_t>(kv, static_cast<uint32_t>(ValueType::kUint32));
    put<uint32_t>(kv, alignment);
    ++kv_count;
  }
  put<uint64_t>(head, kv_count);
  head += kv;
  std::vector<uint64_t> offsets;
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    off = align_up(off, alignment);
    offsets.push_back(off);
    off += t.nbytes;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offsets[i]);
  }
  head.resize(align_up(head.size(), alignment), '\0');

  const std::string part = path + ".part";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::kIo, "cannot create " + part);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  uint64_t pos = 0;
  static const char zeros[64] = {};
  for (size_t i = 0; i < tensors_.size(); ++i) {
    while (pos < offsets[i]) {
      const uint64_t n = std::min<uint64_t>(sizeof zeros, offsets[i] - pos);
      out.write(zeros, static_cast<std::streamsize>(n));
      pos += n;
    }
    uint64_t written = 0;
    produce(i, [&](const void* p, size_t n) {
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
      written += n;
    });
    if (written != tensors_[i].nbytes)
      throw Error(ErrorKind::kInternal, "GGUF tensor \"" + tensors_[i].name + "\": produced " + std::to_string(written) +
                                            " bytes, declared " + std::to_string(tensors_[i].nbytes));
    pos += written;
  }
  out.close();
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + part + " (disk full?)");
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) throw Error(ErrorKind::kIo, "cannot rename " + part + " to " + path + ": " + ec.message());
}

}  // namespace stave::gguf
