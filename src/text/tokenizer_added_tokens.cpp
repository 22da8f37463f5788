#include "text/tokenizer_added_tokens.h"

#include <algorithm>
#include <cstring>

#include "text/tokenizer_unicode.h"

namespace stave::tok {
namespace {

// Start of the run of White_Space that ends `s` (Rust regex `\s*$`, leftmost match).
size_t trailing_space_start(std::string_view s) {
  size_t pos = s.size();
  while (pos > 0) {
    size_t start = pos - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    if (!is_white_space(decode_utf8_at(s, start, len))) break;
    pos = start;
  }
  return pos;
}

// Length of the run of White_Space that starts `s` (Rust regex `^\s*`).
size_t leading_space_length(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    if (!is_white_space(decode_utf8_at(s, pos, len))) break;
    pos += len;
  }
  return pos;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t len = 0;
  return is_word_char(decode_utf8_at(s, start, len));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t len = 0;
  return is_word_char(decode_utf8_at(s, 0, len));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedTokenSpec> tokens, std::vector<std::string> patterns)
    : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;  // HF ignores empty added tokens
    int32_t node = 0;
    for (unsigned char c : p) {
      auto& ch = trie_[size_t(node)].children;
      auto it = std::lower_bound(ch.begin(), ch.end(), c,
                                 [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
      if (it != ch.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t next = int32_t(trie_.size());
        ch.insert(it, {c, next});
        trie_.emplace_back();
        node = next;
      }
    }
    // A repeated content keeps the last token, as HF's content -> id map does.
    trie_[size_t(node)].token = int32_t(t);
    first_byte_[static_cast<unsigned char>(p[0])] = true;
  }
  for (int b = 0; b < 256; ++b) {
    if (!first_byte_[size_t(b)]) continue;
    only_first_byte_ = only_first_byte_ == -1 ? b : -2;
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t& len) const {
  int32_t node = 0;
  int32_t best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& ch = trie_[size_t(node)].children;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    auto it = std::lower_bound(ch.begin(), ch.end(), c,
                               [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
    if (it == ch.end() || it->first != c) break;
    node = it->second;
    if (trie_[size_t(node)].token >= 0) {
      best = trie_[size_t(node)].token;
      len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (text.empty()) return;
  size_t start_offset = 0;  // end of the last accepted match (HF's start_offset)
  size_t pos = 0;           // where the non-overlapping scan resumes
  while (pos < text.size()) {
    if (only_first_byte_ >= 0) {
      const void* hit = std::memchr(text.data() + pos, only_first_byte_, text.size() - pos);
      if (hit == nullptr) break;
      pos = size_t(static_cast<const char*>(hit) - text.data());
    } else if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const int32_t t = longest_at(text, pos, len);
    if (t < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;  // the scan goes on after every match, accepted or not
    const AddedTokenSpec& tok = tokens_[size_t(t)];
    if (tok.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace stave::tok
