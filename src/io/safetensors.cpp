#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "util/json_limits.h"

namespace stave {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw Error(ErrorKind::kInvalidModel, "safetensors file " + label + ": " + what);
}

// Parses the header JSON and rejects duplicate keys at any depth (nlohmann keeps the last one
// silently, which would let two tensors share a name).
json parse_header_json(const char* begin, size_t len, const std::string& label) {
  std::vector<std::set<std::string>> keys_per_depth;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        if (keys_per_depth.size() <= static_cast<size_t>(depth)) keys_per_depth.resize(depth + 1);
        keys_per_depth[depth].clear();
        break;
      case json::parse_event_t::key: {
        size_t d = static_cast<size_t>(depth > 0 ? depth - 1 : 0);
        if (keys_per_depth.size() <= d) keys_per_depth.resize(d + 1);
        const auto& k = parsed.get_ref<const std::string&>();
        if (!keys_per_depth[d].insert(k).second && duplicate.empty()) duplicate = k;
        break;
      }
      default:
        break;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, begin + len, cb);
  } catch (const json::exception& e) {
    fail(label, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) fail(label, "header names \"" + duplicate + "\" twice");
  return header;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

std::string TensorRef::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label) {
  if (size < 8) fail(label, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kSafetensorsMaxHeader)
    fail(label, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                    std::to_string(kSafetensorsMaxHeader) + " bytes");
  if (header_len > size - 8)
    fail(label, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                    std::to_string(size) + " bytes)");
  if (header_len < 2 || bytes[8] != '{') fail(label, "header does not start with a JSON object");
  check_json_depth(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len), label + " header");
  json header = parse_header_json(reinterpret_cast<const char*>(bytes + 8), header_len, label);
  if (!header.is_object()) fail(label, "header is not a JSON object");
  if (header.size() > kSafetensorsMaxTensors + 1)  // + __metadata__
    fail(label, "header lists " + std::to_string(header.size()) + " entries, more than the limit of " +
                    std::to_string(kSafetensorsMaxTensors) + " tensors");

  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_len = size - 8 - header_len;

  SafetensorsContents out;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail(label, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(label, "__metadata__ value for \"" + m.key() + "\" is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const json& info = *it;
    auto where = "tensor \"" + name + "\"";
    if (!info.is_object()) fail(label, where + " entry is not an object");
    for (auto f = info.begin(); f != info.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        fail(label, where + " has an unknown field \"" + f.key() + "\"");
    if (!info.contains("dtype") || !info["dtype"].is_string()) fail(label, where + " has no dtype string");
    auto dt = parse_dtype(info["dtype"].get<std::string>());
    if (!dt) fail(label, where + " has unknown dtype \"" + info["dtype"].get<std::string>() + "\"");
    if (!info.contains("shape") || !info["shape"].is_array()) fail(label, where + " has no shape array");
    if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
      fail(label, where + " has no [begin, end] data_offsets");
    TensorRef t;
    t.name = name;
    t.dtype = *dt;
    uint64_t numel = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) fail(label, where + " has a shape entry that is not a non-negative integer");
      uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || !checked_mul(numel, v, &numel))
        fail(label, where + " has a shape whose element count overflows");
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(label, where + " has data_offsets that are not non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) fail(label, where + " has data_offsets with begin after end");
    if (e > data_len)
      fail(label, where + " has data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                      ") past the end of the data (" + std::to_string(data_len) + " bytes)");
    uint64_t expected = 0;
    if (!checked_mul(numel, dtype_size(*dt), &expected) || expected != e - b)
      fail(label, where + " is " + std::to_string(e - b) + " bytes but " + std::string(dtype_name(*dt)) + " " +
                      t.shape_string() + " needs " + std::to_string(numel * dtype_size(*dt)));
    t.data = data + b;
    t.nbytes = static_cast<size_t>(e - b);
    spans.push_back({b, e, out.tensors.size()});
    out.tensors.push_back(std::move(t));
  }
  // The reference format packs tensors back to back: sorted by offset they must tile the data.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const auto& s : spans) {
    if (s.begin < pos)
      fail(label, "tensor \"" + out.tensors[s.index].name + "\" overlaps the tensor before it");
    if (s.begin > pos)
      fail(label, "gap of " + std::to_string(s.begin - pos) + " bytes before tensor \"" +
                      out.tensors[s.index].name + "\"");
    pos = s.end;
  }
  if (pos != data_len)
    fail(label, std::to_string(data_len - pos) + " bytes of data after the last tensor are not described");
  std::vector<TensorRef> ordered;
  ordered.reserve(spans.size());
  for (const auto& s : spans) ordered.push_back(std::move(out.tensors[s.index]));
  out.tensors = std::move(ordered);
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  contents_ = parse_safetensors(file_.data(), file_.size(), path);
  for (size_t i = 0; i < contents_.tensors.size(); ++i) index_[contents_.tensors[i].name] = i;
}

const TensorRef* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &contents_.tensors[it->second];
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (header.contains(t.name)) throw Error(ErrorKind::kInternal, "write_safetensors: duplicate tensor " + t.name);
    uint64_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel * dtype_size(t.dtype) != t.nbytes)
      throw Error(ErrorKind::kInternal, "write_safetensors: " + t.name + " byte size does not match its shape");
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path);
  uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
  if (!out) throw Error(ErrorKind::kIo, "error while writing " + path);
}

}  // namespace stave
