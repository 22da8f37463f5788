#include "text/bpe_word_cache.h"

#include <cstring>

namespace stave::tok {

template <typename S>
BpeWordCache::Table<S>::Table(size_t n_slots) {
  size_t n = 16;
  while (n < n_slots) n *= 2;
  slots = std::make_unique<S[]>(n);
  mask = n - 1;
  shift = 64 - __builtin_ctzll(n);
}

BpeWordCache::BpeWordCache(size_t short_slots, size_t long_slots) : short_(short_slots), long_(long_slots) {}
uint64_t BpeWordCache::hash(std::string_view word) {
  // Eight bytes at a time through a multiply-xorshift mix (splitmix64's finalizer). Words are
  // short; a collision costs only a miss, since a slot holds one word and compares it in full.
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  size_t n = word.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t(n) * 0xD6E8FEB86659FD93ull);
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
  };
  while (n >= 8) {
    uint64_t chunk;
    std::memcpy(&chunk, p, 8);
    h = mix(h ^ chunk);
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, p, n);
    h = mix(h ^ chunk ^ 0xFF);
  }
  return h == 0 ? 1 : h;
}

template <typename S>
bool BpeWordCache::find_in(const Table<S>& t, std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
  const size_t index = t.index(h);
  const S& s = t.slots[index];
  int32_t ids[sizeof(s.ids) / sizeof(int32_t)];
  size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(lock_for(index));
    if (s.hash != h || s.word_len != word.size() || std::memcmp(s.word, word.data(), word.size()) != 0)
      return false;
    count = s.id_count;
    std::memcpy(ids, s.ids, count * sizeof(int32_t));
  }
  out.insert(out.end(), ids, ids + count);
  return true;
}

template <typename S>
void BpeWordCache::insert_in(Table<S>& t, std::string_view word, uint64_t h, const int32_t* ids, size_t count) {
  if (word.size() > sizeof(S::word) || count > sizeof(S::ids) / sizeof(int32_t)) return;
  const size_t index = t.index(h);
  S& s = t.slots[index];
  std::lock_guard<std::mutex> lock(lock_for(index));
  s.hash = h;
  s.word_len = uint8_t(word.size());
  s.id_count = uint8_t(count);
  std::memcpy(s.word, word.data(), word.size());
  std::memcpy(s.ids, ids, count * sizeof(int32_t));
}

bool BpeWordCache::find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
  return word.size() <= sizeof(ShortSlot::word) ? find_in(short_, word, h, out) : find_in(long_, word, h, out);
}

void BpeWordCache::insert(std::string_view word, uint64_t h, const int32_t* ids, size_t count) {
  if (word.size() <= sizeof(ShortSlot::word))
    insert_in(short_, word, h, ids, count);
  else
    insert_in(long_, word, h, ids, count);
}

size_t BpeWordCache::size() const {
  size_t n = 0;
  for (size_t i = 0; i <= short_.mask; ++i) {
    std::lock_guard<std::mutex> lock(lock_for(i));
    n += short_.slots[i].hash != 0;
  }
  for (size_t i = 0; i <= long_.mask; ++i) {
    std::lock_guard<std::mutex> lock(lock_for(i));
    n += long_.slots[i].hash != 0;
  }
  return n;
}

}  // namespace stave::tok
