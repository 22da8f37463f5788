#include "text/bpe_word_cache.h"

#include <algorithm>

namespace stave::tok {

BpeWordCache::BpeWordCache(size_t capacity, size_t max_word_bytes)
    : per_shard_capacity_(std::max<size_t>(1, capacity / kShards)), max_word_bytes_(max_word_bytes) {}

bool BpeWordCache::find(std::string_view word, std::vector<int32_t>& out) const {
  const Shard& shard = shards_[shard_of(word)];
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeWordCache::insert(std::string_view word, const int32_t* ids, size_t count) {
  if (!cacheable(word)) return;
  Shard& shard = shards_[shard_of(word)];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= per_shard_capacity_) shard.map.clear();
  shard.map.try_emplace(std::string(word), ids, ids + count);
}

size_t BpeWordCache::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mutex);
    n += s.map.size();
  }
  return n;
}

}  // namespace stave::tok
