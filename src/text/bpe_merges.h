// BPE merging: the merge-rank table keyed on id pairs, and the merge loop. The rule is Hugging
// Face's: repeatedly merge the adjacent pair with the lowest rank, the leftmost one on ties.
// `bpe_merge` is the fast version (cached ranks for short words, a heap for long ones);
// `bpe_merge_reference` is the plain loop that tests hold it to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace stave::tok {

class BpeMergeTable {
 public:
  struct Merge {
    uint32_t rank;
    int32_t merged;  // id of the merged token
  };

  void reserve(size_t merges);
  // A pair given twice keeps the later rank, as HF's merge map does.
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }
  // Starts loading the slot of (left, right): the first lookups of a word are independent, and
  // issuing their memory loads together hides most of their latency.
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[slot_of(pack(left, right))]);
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are non-negative, so never a real key
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow(size_t capacity);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Merges `symbols` (token ids) in place.
void bpe_merge(const BpeMergeTable& merges, std::vector<int32_t>& symbols);
void bpe_merge_reference(const BpeMergeTable& merges, std::vector<int32_t>& symbols);

}  // namespace stave::tok
