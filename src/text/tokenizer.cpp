// The tokenizer pipeline, in HF's order: added tokens found in the raw text, each remaining
// piece normalized (NFC) and searched for normalized added tokens, then split by the
// pre-tokenizer regexes, then byte-level BPE per piece.
#include "text/tokenizer.h"

#include <filesystem>
#include <unordered_map>

#include "stave/errors.h"
#include "text/bpe_byte_level.h"
#include "text/bpe_model.h"
#include "text/pretokenize_regex.h"
#include "text/tokenizer_added_tokens.h"
#include "text/tokenizer_json.h"
#include "text/tokenizer_unicode.h"
#include "util/mapped_file.h"

namespace stave {
namespace {

using tok::TextSegment;

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(tok::TokenizerSpec spec, const std::string& label)
      : nfc_(spec.nfc), model_(std::move(spec.bpe), label) {
    for (const tok::SplitSpec& s : spec.splits) splits_.emplace_back(s.pattern, s.is_regex);
    if (nfc_) tok::prepare_nfc();

    // Added tokens: those with normalized=false are found in the raw text, the others in the
    // normalized text, by their normalized content (HF's two tries).
    std::vector<tok::AddedTokenSpec> raw, normalized;
    std::vector<std::string> raw_patterns, normalized_patterns;
    vocab_size_ = model_.id_limit();
    for (tok::AddedTokenSpec& a : spec.added_tokens) {
      tok::require_utf8(a.content, "an added token");
      vocab_size_ = std::max(vocab_size_, a.id + 1);
      added_by_content_[a.content] = a.id;
      added_content_[a.id] = a.content;
      if (a.normalized) {
        normalized_patterns.push_back(nfc_ ? tok::to_nfc(a.content) : a.content);
        normalized.push_back(std::move(a));
      } else {
        raw_patterns.push_back(a.content);
        raw.push_back(std::move(a));
      }
    }
    raw_matcher_ = tok::AddedTokenMatcher(std::move(raw), std::move(raw_patterns));
    normalized_matcher_ = tok::AddedTokenMatcher(std::move(normalized), std::move(normalized_patterns));

    id_bytes_.resize(size_t(model_.id_limit()));
    for (int32_t id = 0; id < model_.id_limit(); ++id)
      if (const std::string* t = model_.id_to_token(id)) id_bytes_[size_t(id)] = tok::byte_level_token_bytes(*t);
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    for_each_piece(text, [&](std::string_view piece, int32_t added_id) {
      if (added_id >= 0)
        ids.push_back(added_id);
      else
        model_.encode_word(piece, ids);
    });
    return ids;
  }

  std::vector<std::string> pre_tokenize(std::string_view text) const override {
    std::vector<std::string> pieces;
    for_each_piece(text, [&](std::string_view piece, int32_t) { pieces.emplace_back(piece); });
    return pieces;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out, bytes;
    for (int32_t id : ids) {
      if (auto it = added_content_.find(id); it != added_content_.end()) {
        tok::append_utf8_lossy(bytes, out);
        bytes.clear();
        out += it->second;
      } else if (id >= 0 && size_t(id) < id_bytes_.size() && model_.id_to_token(id) != nullptr) {
        bytes += id_bytes_[size_t(id)];
      } else {
        throw Error(ErrorKind::kInvalidRequest, "cannot decode token id " + std::to_string(id) +
                                                    ": no token has that id (vocab size " +
                                                    std::to_string(vocab_size_) + ")");
      }
    }
    tok::append_utf8_lossy(bytes, out);
    return out;
  }

  std::string token_bytes(int32_t id) const override {
    if (id >= 0 && size_t(id) < id_bytes_.size() && !added_content_.contains(id) && model_.id_to_token(id) != nullptr)
      return id_bytes_[size_t(id)];
    return decode({id});  // an added token's content, or the error naming a bad id
  }

  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) return it->second;
    return model_.token_to_id(token);
  }

  int32_t vocab_size() const override { return vocab_size_; }
  bool has_token(int32_t id) const override {
    return added_content_.contains(id) || (id >= 0 && size_t(id) < id_bytes_.size() && model_.id_to_token(id) != nullptr);
  }

 private:
  // Calls emit(piece, added_id) for every piece in order: added_id >= 0 for an added token,
  // -1 for a pre-tokenized word (its normalized UTF-8 bytes).
  template <typename Emit>
  void for_each_piece(std::string_view text, Emit&& emit) const {
    tok::require_utf8(text, "the text to encode");
    std::vector<TextSegment> raw_segments;
    if (raw_matcher_.empty())
      raw_segments.push_back({0, text.size(), -1});
    else
      raw_matcher_.split(text, raw_segments);
    std::string normalized;
    std::vector<TextSegment> segments;
    std::vector<std::pair<size_t, size_t>> pieces, next;
    for (const TextSegment& raw : raw_segments) {
      if (raw.token_id >= 0) {
        emit(text.substr(raw.begin, raw.end - raw.begin), raw.token_id);
        continue;
      }
      std::string_view part = text.substr(raw.begin, raw.end - raw.begin);
      if (nfc_) {
        normalized.clear();
        tok::append_nfc(part, normalized);
        part = normalized;
      }
      segments.clear();
      if (normalized_matcher_.empty())
        segments.push_back({0, part.size(), -1});
      else
        normalized_matcher_.split(part, segments);
      for (const TextSegment& seg : segments) {
        if (seg.token_id >= 0) {
          emit(part.substr(seg.begin, seg.end - seg.begin), seg.token_id);
          continue;
        }
        pieces.assign(1, {seg.begin, seg.end});
        for (const tok::SplitRegex& re : splits_) {
          next.clear();
          for (const auto& [b, e] : pieces) re.split(part.substr(b, e - b), b, next);
          pieces.swap(next);
        }
        for (const auto& [b, e] : pieces)
          if (e > b) emit(part.substr(b, e - b), -1);
      }
    }
  }

  bool nfc_;
  std::vector<tok::SplitRegex> splits_;
  tok::BpeModel model_;
  tok::AddedTokenMatcher raw_matcher_;
  tok::AddedTokenMatcher normalized_matcher_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::unordered_map<int32_t, std::string> added_content_;
  std::vector<std::string> id_bytes_;  // what each vocabulary id decodes to
  int32_t vocab_size_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string& json_text, const std::string& label) {
  return std::make_unique<BpeTokenizer>(tok::parse_tokenizer_json(json_text, label), label);
}

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::string& path) {
  std::string file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  if (!std::filesystem::exists(file, ec))
    throw Error(ErrorKind::kInvalidModel, "tokenizer file not found: " + file);
  return from_json(read_file(file, tok::kMaxTokenizerBytes), file);
}

}  // namespace stave
