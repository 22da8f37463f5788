// Reads tokenizer.json in one streaming pass. model.vocab and model.merges (nearly all of the
// 11 MB) go straight into vectors; everything else becomes an ordinary nlohmann DOM. Building
// a DOM of 150k vocabulary entries and 150k merge pairs would take most of the load time.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace stave::tok {

struct StreamedTokenizerJson {
  nlohmann::json dom;  // the document without model.vocab / model.merges when streamed
  bool has_vocab = false;
  std::vector<std::pair<std::string, int32_t>> vocab;
  bool has_merges = false;
  std::vector<std::pair<std::string, std::string>> merges;  // "#version" lines dropped
};

// Throws stave::Error(kInvalidModel) starting with `label` for malformed JSON, or for a vocab
// entry or merge of the wrong shape (naming it).
StreamedTokenizerJson read_tokenizer_json(const std::string& text, const std::string& label);

}  // namespace stave::tok
