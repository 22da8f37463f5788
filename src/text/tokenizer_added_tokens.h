// Finding added tokens in text as Hugging Face's AddedVocabulary::find_matches does: a
// leftmost-longest, non-overlapping scan over the token contents (the aho-corasick
// LeftmostLongest semantics), then per match the single_word / lstrip / rstrip rules.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer_json.h"

namespace stave::tok {

// A piece of the text: [begin, end) in bytes, and the added token id, or -1 for plain text.
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int32_t token_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is the text that finds `tokens[i]` (its content, or its normalized content).
  AddedTokenMatcher(std::vector<AddedTokenSpec> tokens, std::vector<std::string> patterns);

  bool empty() const { return tokens_.empty(); }

  // Appends the segments covering `text` (empty text gives nothing). Adjacent plain text stays
  // one segment; every accepted match is its own segment.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_ ending here
  };
  // Longest pattern that starts at text[pos]: its token index and length, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t& len) const;

  std::vector<AddedTokenSpec> tokens_;
  std::vector<Node> trie_;
  std::array<bool, 256> first_byte_{};
  int only_first_byte_ = -1;  // when every token starts with the same byte: memchr finds it
};

}  // namespace stave::tok
