#include "text/tokenizer_json_sax.h"

#include "stave/errors.h"
#include "text/tokenizer_json.h"
#include "util/json_limits.h"

namespace stave::tok {
namespace {

using nlohmann::json;

// An nlohmann SAX handler: a plain DOM builder, except inside model.vocab and model.merges.
class Reader {
 public:
  explicit Reader(StreamedTokenizerJson& out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::kVocab) {
      if (v >= kMaxVocab)
        return fail("model.vocab[\"" + vocab_key_ + "\"] = " + std::to_string(v) + " is not below the limit of " +
                    std::to_string(kMaxVocab) + " ids");
      if (out_.vocab.size() >= kMaxVocab)
        return fail("model.vocab has more than the limit of " + std::to_string(kMaxVocab) + " entries");
      out_.vocab.emplace_back(std::move(vocab_key_), int32_t(v));
      return true;
    }
    return value(json(v));
  }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool binary(json::binary_t&) { return fail("unexpected binary value"); }

  bool string(std::string& s) {
    if (mode_ == Mode::kMerges) {
      // Legacy "a b" form: exactly one space (as HF splits it); "#version" header lines skipped.
      if (s.rfind("#version", 0) == 0) return true;
      if (merge_index_ >= kMaxMerges)
        return fail("model.merges has more than the limit of " + std::to_string(kMaxMerges) + " entries");
      if (s.size() > 2 * kMaxTokenBytes + 1)
        return fail("model.merges[" + std::to_string(merge_index_) + "] is longer than " +
                    std::to_string(2 * kMaxTokenBytes + 1) + " bytes");
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return fail("model.merges[" + std::to_string(merge_index_) + "] is not \"a b\"");
      out_.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      ++merge_index_;
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (s.size() > kMaxTokenBytes)
        return fail("model.merges[" + std::to_string(merge_index_) + "] holds a token longer than " +
                    std::to_string(kMaxTokenBytes) + " bytes");
      if (pair_.size() > 2) return fail("model.merges[" + std::to_string(merge_index_) + "] is not [\"a\", \"b\"]");
      pair_.push_back(std::move(s));
      return true;
    }
    return value(json(std::move(s)));
  }

  bool start_object(std::size_t) {
    if (pending_ == Pending::kVocab) {
      pending_ = Pending::kNone;
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    if (mode_ != Mode::kDom) return fail(where() + " holds an object");
    return open(json::object());
  }
  bool key(std::string& k) {
    if (mode_ == Mode::kVocab) {
      if (k.size() > kMaxTokenBytes)
        return fail("model.vocab has a token of " + std::to_string(k.size()) + " bytes, longer than the limit of " +
                    std::to_string(kMaxTokenBytes));
      vocab_key_ = std::move(k);
      return true;
    }
    // model.vocab and model.merges are streamed when they have the expected container type.
    pending_ = Pending::kNone;
    if (stack_.size() == 2 && path_.size() == 2 && path_[1] == "model") {
      if (k == "vocab") pending_ = Pending::kVocab;
      if (k == "merges") pending_ = Pending::kMerges;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) {
    if (pending_ == Pending::kMerges) {
      pending_ = Pending::kNone;
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return fail(where() + " holds an array");
    return open(json::array());
  }
  bool end_array() {
    if (mode_ == Mode::kMergePair) {
      if (merge_index_ >= kMaxMerges)
        return fail("model.merges has more than the limit of " + std::to_string(kMaxMerges) + " entries");
      if (pair_.size() != 2) return fail("model.merges[" + std::to_string(merge_index_) + "] is not [\"a\", \"b\"]");
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      ++merge_index_;
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return fail(std::string("not valid JSON: ") + e.what());
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };
  enum class Pending { kNone, kVocab, kMerges };

  bool fail(const std::string& message) {
    if (error_.empty()) error_ = message;
    return false;
  }
  std::string where() const {
    switch (mode_) {
      case Mode::kVocab: return "model.vocab[\"" + vocab_key_ + "\"]";
      case Mode::kMerges:
      case Mode::kMergePair: return "model.merges[" + std::to_string(merge_index_) + "]";
      default: return "the document";
    }
  }
  // Places a finished value in the DOM (or refuses it inside a streamed section).
  bool value(json v) {
    pending_ = Pending::kNone;
    if (mode_ != Mode::kDom) return fail(where() + " has a value of the wrong type");
    place(std::move(v));
    return true;
  }
  json* place(json v) {
    if (stack_.empty()) {
      out_.dom = std::move(v);
      return &out_.dom;
    }
    json& top = *stack_.back();
    if (top.is_object()) return &(top[key_] = std::move(v));
    top.push_back(std::move(v));
    return &top.back();
  }
  bool open(json container) {
    pending_ = Pending::kNone;
    // The key this container sits under (for objects) or "" (array items, the root).
    path_.push_back(!stack_.empty() && stack_.back()->is_object() ? key_ : std::string());
    stack_.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    path_.pop_back();
    return true;
  }

  StreamedTokenizerJson& out_;
  std::vector<json*> stack_;       // open DOM containers (pointers stay valid: only the last
                                   // child of each container is open)
  std::vector<std::string> path_;  // the key of each open container
  std::string key_;
  Mode mode_ = Mode::kDom;
  Pending pending_ = Pending::kNone;
  std::string vocab_key_;
  std::vector<std::string> pair_;
  size_t merge_index_ = 0;
  std::string error_;
};

}  // namespace

StreamedTokenizerJson read_tokenizer_json(const std::string& text, const std::string& label) {
  if (text.size() > kMaxTokenizerBytes)
    throw Error(ErrorKind::kInvalidModel, label + ": " + std::to_string(text.size()) +
                                              " bytes, larger than the limit of " + std::to_string(kMaxTokenizerBytes));
  check_json_depth(text, label);
  StreamedTokenizerJson out;
  Reader reader(out);
  if (!json::sax_parse(text, &reader) || !reader.error().empty())
    throw Error(ErrorKind::kInvalidModel,
                label + ": " + (reader.error().empty() ? std::string("not valid JSON") : reader.error()));
  return out;
}

}  // namespace stave::tok
