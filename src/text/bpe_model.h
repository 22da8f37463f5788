// The byte-level BPE model of a tokenizer.json: vocabulary, merge ranks, and the encoding of
// one pre-tokenized word (its UTF-8 bytes) into ids, with HF's unk / fuse_unk / ignore_merges
// rules and a word cache.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe_merges.h"
#include "text/bpe_word_cache.h"
#include "text/tokenizer_json.h"

namespace stave::tok {

class BpeModel {
 public:
  // Throws stave::Error(kInvalidModel) naming a merge whose tokens are not in the vocabulary.
  BpeModel(BpeSpec spec, const std::string& label);

  // Appends the ids of one word, given as raw bytes (the byte-level spelling is implied).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // The same without the cache, with the fast or the reference merge loop (for tests).
  void encode_word_uncached(std::string_view word, std::vector<int32_t>& out, bool reference = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of `id`, or nullptr when no token has that id.
  const std::string* id_to_token(int32_t id) const;
  // One more than the largest id.
  int32_t id_limit() const { return int32_t(id_to_token_.size()); }
  const BpeMergeTable& merges() const { return merges_; }
  const BpeWordCache& cache() const { return cache_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };

  std::unordered_map<std::string, int32_t, Hash, Equal> vocab_;
  std::vector<const std::string*> id_to_token_;  // points into vocab_ keys (stable in a node map)
  std::array<int32_t, 256> byte_id_{};           // id of each byte's one-character token, or -1
  BpeMergeTable merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  mutable BpeWordCache cache_;
};

}  // namespace stave::tok
