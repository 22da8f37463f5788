#include "text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "stave/errors.h"
#include "text/tokenizer_json_sax.h"

namespace stave::tok {

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using nlohmann::json;

class Parser {
 public:
  explicit Parser(std::string label) : label_(std::move(label)) {}

  [[noreturn]] void invalid(const std::string& what) const {
    throw Error(ErrorKind::kInvalidModel, label_ + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorKind::kUnsupported, label_ + ": " + what);
  }

  const json* member(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  bool is_null_or_absent(const json& obj, const char* key) const {
    const json* v = member(obj, key);
    return v == nullptr || v->is_null();
  }
  std::string type_of(const json& obj, const std::string& path) const {
    if (!obj.is_object()) invalid(path + " is not an object");
    const json* t = member(obj, "type");
    if (t == nullptr || !t->is_string()) invalid(path + ".type is missing");
    return t->get<std::string>();
  }
  bool get_bool(const json& obj, const char* key, bool fallback, const std::string& path) const {
    const json* v = member(obj, key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_boolean()) invalid(path + "." + key + " is not a boolean");
    return v->get<bool>();
  }
  // Null, absent or "" count as unset (HF treats Some("") like None for these prefixes).
  void require_empty_string(const json& obj, const char* key, const std::string& path) const {
    const json* v = member(obj, key);
    if (v == nullptr || v->is_null()) return;
    if (!v->is_string()) invalid(path + "." + key + " is not a string");
    if (!v->get_ref<const std::string&>().empty())
      unsupported(path + "." + key + " = \"" + v->get<std::string>() + "\" is not supported");
  }

  void parse_added_tokens(const json& root, TokenizerSpec& spec) const {
    const json* list = member(root, "added_tokens");
    if (list == nullptr || list->is_null()) return;
    if (!list->is_array()) invalid("added_tokens is not an array");
    if (list->size() > kMaxAddedTokens)
      invalid("added_tokens has " + std::to_string(list->size()) + " entries, more than the limit of " +
              std::to_string(kMaxAddedTokens));
    for (size_t i = 0; i < list->size(); ++i) {
      const json& t = (*list)[i];
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object()) invalid(path + " is not an object");
      AddedTokenSpec a;
      const json* id = member(t, "id");
      if (id == nullptr || !id->is_number_unsigned() || id->get<uint64_t>() >= kMaxVocab)
        invalid(path + ".id is missing or not an integer in [0, " + std::to_string(kMaxVocab) + ")");
      a.id = int32_t(id->get<uint64_t>());
      const json* content = member(t, "content");
      if (content == nullptr || !content->is_string()) invalid(path + ".content is missing");
      a.content = content->get<std::string>();
      if (a.content.size() > kMaxTokenBytes)
        invalid(path + ".content is longer than the limit of " + std::to_string(kMaxTokenBytes) + " bytes");
      a.single_word = get_bool(t, "single_word", false, path);
      a.lstrip = get_bool(t, "lstrip", false, path);
      a.rstrip = get_bool(t, "rstrip", false, path);
      a.normalized = get_bool(t, "normalized", true, path);
      a.special = get_bool(t, "special", false, path);
      spec.added_tokens.push_back(std::move(a));
    }
  }

  void parse_normalizer(const json& n, const std::string& path, TokenizerSpec& spec) const {
    if (n.is_null()) return;
    const std::string type = type_of(n, path);
    if (type == "NFC") {
      spec.nfc = true;
    } else if (type == "Sequence") {
      const json* list = member(n, "normalizers");
      if (list == nullptr || !list->is_array()) invalid(path + ".normalizers is missing");
      for (size_t i = 0; i < list->size(); ++i)
        parse_normalizer((*list)[i], path + ".normalizers[" + std::to_string(i) + "]", spec);
    } else {
      unsupported("normalizer type '" + type + "' (at " + path + ") is not supported; stave implements NFC");
    }
  }

  void parse_pre_tokenizer(const json& p, const std::string& path, TokenizerSpec& spec, bool& byte_level) const {
    const std::string type = type_of(p, path);
    if (type == "Sequence") {
      const json* list = member(p, "pretokenizers");
      if (list == nullptr || !list->is_array()) invalid(path + ".pretokenizers is missing");
      for (size_t i = 0; i < list->size(); ++i)
        parse_pre_tokenizer((*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]", spec, byte_level);
      return;
    }
    // ByteLevel turns the text into byte symbols; a split after it would see those symbols.
    if (byte_level) unsupported("pre_tokenizer " + path + " (" + type + ") after ByteLevel is not supported");
    if (type == "Split") {
      const json* pattern = member(p, "pattern");
      if (pattern == nullptr || !pattern->is_object()) invalid(path + ".pattern is missing");
      SplitSpec s;
      if (const json* re = member(*pattern, "Regex"); re != nullptr && re->is_string()) {
        s.pattern = re->get<std::string>();
        s.is_regex = true;
      } else if (const json* str = member(*pattern, "String"); str != nullptr && str->is_string()) {
        s.pattern = str->get<std::string>();
        s.is_regex = false;
      } else {
        invalid(path + ".pattern has neither Regex nor String");
      }
      const json* behavior = member(p, "behavior");
      if (behavior == nullptr || !behavior->is_string()) invalid(path + ".behavior is missing");
      if (behavior->get<std::string>() != "Isolated")
        unsupported(path + ".behavior '" + behavior->get<std::string>() + "' is not supported (only Isolated)");
      if (get_bool(p, "invert", false, path)) unsupported(path + ".invert = true is not supported");
      spec.splits.push_back(std::move(s));
    } else if (type == "ByteLevel") {
      if (get_bool(p, "add_prefix_space", true, path))
        unsupported(path + ".add_prefix_space = true is not supported");
      if (get_bool(p, "use_regex", true, path)) spec.splits.push_back({kGpt2SplitPattern, true});
      byte_level = true;
    } else {
      unsupported("pre_tokenizer type '" + type + "' (at " + path + ") is not supported");
    }
  }

  void parse_model(const json& m, StreamedTokenizerJson& streamed, TokenizerSpec& spec) const {
    const std::string type = type_of(m, "model");
    if (type != "BPE") unsupported("model type '" + type + "' is not supported; stave implements BPE");
    BpeSpec& bpe = spec.bpe;
    if (const json* d = member(m, "dropout"); d != nullptr && !d->is_null()) {
      if (!d->is_number()) invalid("model.dropout is not a number");
      if (d->get<double>() != 0.0) unsupported("model.dropout = " + d->dump() + " is not supported");
    }
    if (const json* u = member(m, "unk_token"); u != nullptr && !u->is_null()) {
      if (!u->is_string()) invalid("model.unk_token is not a string");
      bpe.unk_token = u->get<std::string>();
    }
    require_empty_string(m, "continuing_subword_prefix", "model");
    require_empty_string(m, "end_of_word_suffix", "model");
    bpe.fuse_unk = get_bool(m, "fuse_unk", false, "model");
    if (get_bool(m, "byte_fallback", false, "model")) unsupported("model.byte_fallback = true is not supported");
    bpe.ignore_merges = get_bool(m, "ignore_merges", false, "model");

    // The streamed vocab and merges arrive separately; here only their absence is reported.
    if (!streamed.has_vocab) invalid("model.vocab is missing or not an object");
    if (!streamed.has_merges) invalid("model.merges is missing or not an array");
    bpe.vocab = std::move(streamed.vocab);
    bpe.merges = std::move(streamed.merges);
  }

  TokenizerSpec parse(const std::string& text) const {
    StreamedTokenizerJson streamed = read_tokenizer_json(text, label_);
    const json& root = streamed.dom;
    if (!root.is_object()) invalid("the top level is not an object");
    TokenizerSpec spec;
    // Truncation and padding would change the ids of a single encode; stave applies neither.
    if (!is_null_or_absent(root, "truncation")) unsupported("truncation is set; it is not supported");
    if (!is_null_or_absent(root, "padding")) unsupported("padding is set; it is not supported");
    parse_added_tokens(root, spec);
    if (const json* n = member(root, "normalizer")) parse_normalizer(*n, "normalizer", spec);
    const json* pre = member(root, "pre_tokenizer");
    if (pre == nullptr || pre->is_null()) unsupported("pre_tokenizer is missing; stave needs a ByteLevel one");
    bool byte_level = false;
    parse_pre_tokenizer(*pre, "pre_tokenizer", spec, byte_level);
    if (!byte_level) unsupported("pre_tokenizer has no ByteLevel step; stave implements byte-level BPE only");
    const json* model = member(root, "model");
    if (model == nullptr) invalid("model is missing");
    parse_model(*model, streamed, spec);
    const json* decoder = member(root, "decoder");
    if (decoder == nullptr || decoder->is_null()) unsupported("decoder is missing; stave needs ByteLevel");
    const std::string dtype = type_of(*decoder, "decoder");
    if (dtype != "ByteLevel") unsupported("decoder type '" + dtype + "' is not supported; stave implements ByteLevel");
    // post_processor: with add_special_tokens=False no post-processor adds or changes ids
    // (TemplateProcessing and friends only act when special tokens are requested), so it is
    // not read.
    return spec;
  }

 private:
  std::string label_;
};

}  // namespace

TokenizerSpec parse_tokenizer_json(const std::string& json_text, const std::string& label) {
  return Parser(label).parse(json_text);
}

}  // namespace stave::tok
