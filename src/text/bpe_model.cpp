#include "text/bpe_model.h"

#include "stave/errors.h"
#include "text/bpe_byte_level.h"
#include "text/tokenizer_unicode.h"

namespace stave::tok {

BpeModel::BpeModel(BpeSpec spec, const std::string& label) {
  vocab_.reserve(spec.vocab.size());
  int32_t limit = 0;
  for (auto& [token, id] : spec.vocab) {
    limit = std::max(limit, id + 1);
    vocab_.emplace(std::move(token), id);
  }
  id_to_token_.assign(size_t(limit), nullptr);
  for (const auto& [token, id] : vocab_) {
    if (id_to_token_[size_t(id)] != nullptr)
      throw Error(ErrorKind::kInvalidModel, label + ": model.vocab gives id " + std::to_string(id) + " to both \"" +
                                                *id_to_token_[size_t(id)] + "\" and \"" + token + "\"");
    id_to_token_[size_t(id)] = &token;
  }
  for (int b = 0; b < 256; ++b) {
    std::string spelled;
    append_utf8(byte_to_unicode(uint8_t(b)), spelled);
    auto it = vocab_.find(spelled);
    byte_id_[size_t(b)] = it == vocab_.end() ? -1 : it->second;
  }

  merges_.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    auto ia = vocab_.find(a);
    auto ib = vocab_.find(b);
    joined.assign(a).append(b);
    auto im = vocab_.find(joined);
    const std::string* missing = ia == vocab_.end() ? &a : ib == vocab_.end() ? &b : im == vocab_.end() ? &joined : nullptr;
    if (missing != nullptr)
      throw Error(ErrorKind::kInvalidModel, label + ": model.merges[" + std::to_string(rank) + "] uses \"" + *missing +
                                                "\", which is not in model.vocab");
    merges_.insert(ia->second, ib->second, uint32_t(rank), im->second);
  }

  if (spec.unk_token) {
    auto it = vocab_.find(*spec.unk_token);
    if (it == vocab_.end())
      throw Error(ErrorKind::kInvalidModel, label + ": model.unk_token \"" + *spec.unk_token + "\" is not in model.vocab");
    unk_id_ = it->second;
  }
  fuse_unk_ = spec.fuse_unk;
  ignore_merges_ = spec.ignore_merges;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[size_t(id)];
}

void BpeModel::encode_word_uncached(std::string_view word, std::vector<int32_t>& out, bool reference) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    std::string spelled;
    append_byte_level(word, spelled);
    if (auto it = vocab_.find(spelled); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  // A byte without a token becomes unk (consecutive ones fused when fuse_unk), or is dropped
  // when there is no unk token: HF's merge_word.
  bool pending_unk = false;
  for (unsigned char b : word) {
    const int32_t id = byte_id_[b];
    if (id >= 0) {
      if (pending_unk) symbols.push_back(unk_id_);
      pending_unk = false;
      symbols.push_back(id);
    } else if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) symbols.push_back(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(unk_id_);
  if (reference)
    bpe_merge_reference(merges_, symbols);
  else
    bpe_merge(merges_, symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  // One or two bytes: at most one merge, cheaper than a cache lookup.
  if (word.size() <= 2 || !BpeWordCache::cacheable(word)) {
    if (word.size() == 1 && byte_id_[static_cast<unsigned char>(word[0])] >= 0)
      out.push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    else
      encode_word_uncached(word, out);
    return;
  }
  const uint64_t h = BpeWordCache::hash(word);
  if (cache_.find(word, h, out)) return;
  const size_t start = out.size();
  encode_word_uncached(word, out);
  cache_.insert(word, h, out.data() + start, out.size() - start);
}

}  // namespace stave::tok
