#include "io/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "stave/errors.h"

namespace stave {

void SafetensorsWriter::declare(std::string name, DType dtype, std::vector<int64_t> shape) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  for (const auto& e : entries_)
    if (e.name == name) throw Error(ErrorKind::kInternal, "SafetensorsWriter: tensor " + name + " declared twice");
  entries_.push_back({std::move(name), dtype, std::move(shape), n});
}

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t n = 0;
  for (const auto& e : entries_) n += e.nbytes;
  return n;
}

void SafetensorsWriter::write(const std::string& path,
                              const std::function<void(const Entry&, const WriteFn&)>& produce) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {{"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw Error(ErrorKind::kIo, "cannot create " + path + ": " + std::strerror(errno));
  auto put = [&](const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n)
      throw Error(ErrorKind::kIo, "error writing " + path + ": " + std::strerror(errno));
  };
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  put(len, 8);
  put(h.data(), h.size());
  for (const auto& e : entries_) {
    uint64_t written = 0;
    produce(e, [&](const void* p, size_t n) {
      written += n;
      if (written > e.nbytes) throw Error(ErrorKind::kInternal, "SafetensorsWriter: too many bytes for " + e.name);
      put(p, n);
    });
    if (written != e.nbytes) throw Error(ErrorKind::kInternal, "SafetensorsWriter: too few bytes for " + e.name);
  }
  if (std::fflush(f.get()) != 0) throw Error(ErrorKind::kIo, "error writing " + path + ": " + std::strerror(errno));
}

}  // namespace stave
