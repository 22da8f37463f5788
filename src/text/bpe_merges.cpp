#include "text/bpe_merges.h"

#include <algorithm>
#include <limits>

namespace stave::tok {
namespace {

constexpr uint32_t kNoMerge = std::numeric_limits<uint32_t>::max();
// Up to this many symbols the quadratic loop with cached ranks beats a heap.
constexpr size_t kShortWord = 48;

void merge_short(const BpeMergeTable& merges, std::vector<int32_t>& sym) {
  size_t n = sym.size();
  uint32_t rank[kShortWord];
  int32_t merged[kShortWord];
  auto pair_at = [&](size_t i) {
    const BpeMergeTable::Merge* m = merges.find(sym[i], sym[i + 1]);
    rank[i] = m ? m->rank : kNoMerge;
    merged[i] = m ? m->merged : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) merges.prefetch(sym[i], sym[i + 1]);
  for (size_t i = 0; i + 1 < n; ++i) pair_at(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks wins
    if (rank[best] == kNoMerge) break;
    sym[best] = merged[best];
    // Drop symbol best+1 and the pair that started at it.
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) pair_at(best - 1);
    if (best + 1 < n) pair_at(best);
  }
  sym.resize(n);
}

// HF's algorithm: a heap of candidate merges over a linked list of symbols; a candidate is
// stale when either of its symbols has changed since it was pushed.
void merge_long(const BpeMergeTable& merges, std::vector<int32_t>& sym) {
  const size_t n = sym.size();
  struct Node {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
  };
  // Max-heap order reversed: the top is the lowest rank, then the lowest position.
  auto after = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Node> nodes(n);
  for (size_t i = 0; i < n; ++i) nodes[i] = {sym[i], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto push = [&](int32_t pos) {
    const int32_t next = nodes[size_t(pos)].next;
    if (next < 0) return;
    const BpeMergeTable::Merge* m = merges.find(nodes[size_t(pos)].id, nodes[size_t(next)].id);
    if (m == nullptr) return;
    heap.push_back({m->rank, pos, nodes[size_t(pos)].id, nodes[size_t(next)].id});
    std::push_heap(heap.begin(), heap.end(), after);
  };
  for (size_t i = 0; i + 1 < n; ++i) merges.prefetch(sym[i], sym[i + 1]);
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate c = heap.back();
    heap.pop_back();
    Node& left = nodes[size_t(c.pos)];
    if (left.id != c.left || left.next < 0) continue;
    Node& right = nodes[size_t(left.next)];
    if (right.id != c.right) continue;
    left.id = merges.find(c.left, c.right)->merged;
    right.id = -1;  // removed
    left.next = right.next;
    if (right.next >= 0) nodes[size_t(right.next)].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = nodes[size_t(i)].next) sym[out++] = nodes[size_t(i)].id;
  sym.resize(out);
}

}  // namespace

void BpeMergeTable::reserve(size_t merges) {
  size_t capacity = 16;
  while (capacity < merges * 2) capacity *= 2;
  if (capacity > slots_.size()) grow(capacity);
}

void BpeMergeTable::grow(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, {0, 0}});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (const Slot& s : old)
    if (s.key != kEmpty) insert(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.merge.rank, s.merge.merged);
}

void BpeMergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) grow(std::max<size_t>(16, slots_.size() * 2));
  const uint64_t key = pack(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = {rank, merged};
      return;
    }
    if (s.key == kEmpty) {
      s = {key, {rank, merged}};
      ++size_;
      return;
    }
  }
}

void bpe_merge(const BpeMergeTable& merges, std::vector<int32_t>& symbols) {
  if (symbols.size() < 2) return;
  if (symbols.size() <= kShortWord)
    merge_short(merges, symbols);
  else
    merge_long(merges, symbols);
}

void bpe_merge_reference(const BpeMergeTable& merges, std::vector<int32_t>& symbols) {
  while (symbols.size() > 1) {
    size_t best = 0;
    const BpeMergeTable::Merge* best_merge = nullptr;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const BpeMergeTable::Merge* m = merges.find(symbols[i], symbols[i + 1]);
      if (m != nullptr && (best_merge == nullptr || m->rank < best_merge->rank)) {
        best = i;
        best_merge = m;
      }
    }
    if (best_merge == nullptr) return;
    symbols[best] = best_merge->merged;
    symbols.erase(symbols.begin() + std::ptrdiff_t(best) + 1);
  }
}

}  // namespace stave::tok
