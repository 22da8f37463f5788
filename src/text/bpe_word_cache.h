// A bounded, thread-safe cache of BPE results per pre-tokenized word. Text repeats words, and a
// hit skips the merge loop. Sharded by hash so that server threads rarely wait on each other;
// a full shard is emptied (memory stays bounded, and the cache follows what the text uses now).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stave::tok {

class BpeWordCache {
 public:
  // Words longer than `max_word_bytes` are never cached (HF caches below 256 bytes too).
  explicit BpeWordCache(size_t capacity = 1 << 16, size_t max_word_bytes = 255);

  // On a hit appends the ids to `out` and returns true.
  bool find(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t count);
  bool cacheable(std::string_view word) const { return word.size() <= max_word_bytes_; }

  size_t size() const;  // entries now held, for tests

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, Equal> map;
  };
  static constexpr size_t kShards = 32;
  static size_t shard_of(std::string_view word) { return (Hash{}(word) >> 7) % kShards; }

  std::array<Shard, kShards> shards_;
  size_t per_shard_capacity_;
  size_t max_word_bytes_;
};

}  // namespace stave::tok
