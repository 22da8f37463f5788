// A read-only memory map of a whole file. Weights are used in place from the map, so a model
// costs page cache, not heap, and loading is as fast as the first touch of each page.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace stave {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws stave::Error (kIo / kInvalidModel)
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string; throws stave::Error naming the path on failure.
// A file larger than `max_bytes` is refused (kInvalidModel, naming the size and the limit)
// before anything is read: configuration files come from strangers.
inline constexpr size_t kDefaultReadLimit = size_t{256} << 20;  // 256 MiB
std::string read_file(const std::string& path, size_t max_bytes = kDefaultReadLimit);

}  // namespace stave
