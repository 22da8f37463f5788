// A bounded, thread-safe cache of BPE results per pre-tokenized word. Text repeats words, and a
// hit skips the merge loop. It is direct-mapped, like a CPU cache: fixed arrays of slots, each
// holding one word and its ids inline, so a lookup touches one slot, never allocates, and memory
// is fixed at construction (4 MiB of 128-byte slots for short words, 2 MiB of 512-byte slots
// for long ones). A colliding word simply replaces the old one, so no input makes a lookup slow.
// Slots are guarded by striped mutexes, so server threads rarely wait on each other.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace stave::tok {

class BpeWordCache {
 public:
  static constexpr size_t kMaxWordBytes = 246;  // longer words are not cached
  static constexpr size_t kMaxIds = 64;         // nor words that give more ids

  explicit BpeWordCache(size_t short_slots = size_t(1) << 15, size_t long_slots = size_t(1) << 12);

  static uint64_t hash(std::string_view word);
  static bool cacheable(std::string_view word) { return word.size() <= kMaxWordBytes; }

  // On a hit appends the ids to `out` and returns true. `h` is hash(word).
  bool find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const;
  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t count);

  size_t size() const;  // occupied slots, for tests

 private:
  template <size_t kWordBytes, size_t kIds>
  struct alignas(64) Slot {
    uint64_t hash = 0;  // 0 marks an empty slot (hash() never returns 0)
    uint8_t word_len = 0;
    uint8_t id_count = 0;
    char word[kWordBytes];
    int32_t ids[kIds];
  };
  using ShortSlot = Slot<54, 16>;
  using LongSlot = Slot<kMaxWordBytes, kMaxIds>;
  static_assert(sizeof(ShortSlot) == 128 && sizeof(LongSlot) == 512);

  template <typename S>
  struct Table {
    explicit Table(size_t slots);
    std::unique_ptr<S[]> slots;
    size_t mask = 0;
    int shift = 64;
    size_t index(uint64_t h) const { return size_t(h >> shift) & mask; }
  };
  template <typename S>
  bool find_in(const Table<S>& t, std::string_view word, uint64_t h, std::vector<int32_t>& out) const;
  template <typename S>
  void insert_in(Table<S>& t, std::string_view word, uint64_t h, const int32_t* ids, size_t count);

  static constexpr size_t kLocks = 64;
  std::mutex& lock_for(size_t slot_index) const { return locks_[slot_index % kLocks]; }

  Table<ShortSlot> short_;
  Table<LongSlot> long_;
  mutable std::array<std::mutex, kLocks> locks_;
};

}  // namespace stave::tok
